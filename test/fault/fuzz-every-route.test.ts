import Database from 'better-sqlite3';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { dockerBody, githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { breakBody, type RawBody } from './fuzz/break.ts';
import { arbitraryFor, inlineSchemaRefs, type JsonSchema } from './fuzz/json-schema-arbitrary.ts';

type Operation = {
  method: string;
  path: string;
  parameters: Array<{ in: string; name: string; schema?: JsonSchema }>;
  body?: JsonSchema;
};

type Case = { op: Operation; path: string; query: string; headers: Record<string, string>; body: RawBody | undefined; why: string };

const RUNS = 2000;

/**
 * Lease columns: the process renews the leases of the work it holds every third of a
 * lease, in the background, whatever the requests; what a request changes is everything else.
 */
const LEASE_COLUMNS = new Set([
  'runner_id',
  'lease_expires_at',
  'teardown_owner',
  'teardown_lease_expires_at',
  'claimed_by',
  'claim_expires_at',
  'receiver_id',
  'receive_lease_expires_at',
]);

/** The audit log records refused requests too (that is its job): what a refusal must not change is everything else. */
const RECORDS_OF_REQUESTS = new Set(['audit_events']);

/** Every table's rows in one string: equal before and after a request means nothing changed. */
function fingerprint(db: Database.Database): string {
  // SQLite's data_version moves when another connection (the server) commits: unmoved, the rows
  // are the ones read last time. Reading every table after each of 2,000 requests took half of
  // this test's time (85 s against 43 s at load 16) and took it past its timeout when loaded.
  const version = db.pragma('data_version', { simple: true }) as number;
  const known = lastFingerprint.get(db);
  if (known?.version === version) return known.text;
  const text = readAllRows(db);
  lastFingerprint.set(db, { version, text });
  return text;
}

const lastFingerprint = new WeakMap<Database.Database, { version: number; text: string }>();

function readAllRows(db: Database.Database): string {
  const tables = (
    db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{ name: string }>
  ).filter(({ name }) => !RECORDS_OF_REQUESTS.has(name));
  const withoutLeases = (row: Record<string, unknown>) => Object.fromEntries(Object.entries(row).filter(([column]) => !LEASE_COLUMNS.has(column)));
  return tables
    .map(
      ({ name }) =>
        `${name}:${JSON.stringify((db.prepare(`SELECT * FROM "${name}" ORDER BY rowid`).all() as Array<Record<string, unknown>>).map(withoutLeases))}`,
    )
    .join('\n');
}

describe('fuzzing every route with broken requests', () => {
  let server: ServerProcess;
  let api: Api;
  let db: Database.Database;

  beforeAll(async () => {
    // Hour-long stages: nothing moves in the background, so any change is the request's doing.
    server = await startServerProcess({ SANDBOX_STAGE_MS: '3600000', GITHUB_WEBHOOK_SECRET: 'fuzz-webhook-secret', RECONCILE_INTERVAL_MS: '0' });
    api = apiClient(server.url, server.apiKey);
  });
  afterAll(async () => {
    db?.close();
    await server?.kill();
  });

  it('never answers 5xx, stays up, and changes nothing when it rejects a request', async () => {
    const fx = await workspaceFixtures(api);
    const github = await api.post('/v2/deployments', githubBody(uniqueName('fuzz'), fx.integrationId));
    const docker = await api.post('/v2/deployments', dockerBody(uniqueName('fuzz'), fx.listenerId));
    const extraKey = await api.post('/v1/api-keys', { workspace_id: null, description: 'fuzz target' });
    const projects = await api.get('/v1/tracing-projects');
    expect([github.status, docker.status, extraKey.status]).toEqual([201, 201, 201]);
    // Real ids for path parameters some of the time (the bootstrap key's own id is left out, so
    // the fuzzer cannot lock itself out).
    const realIds: Record<string, string[]> = {
      deployment_id: [github.body.id, docker.body.id],
      revision_id: [github.body.latest_revision_id, docker.body.latest_revision_id],
      listener_id: [fx.listenerId],
      integration_id: [fx.integrationId],
      project_id: projects.body.resources.map((p: { id: string }) => p.id),
      key_id: [extraKey.body.id],
    };
    const allIds = Object.values(realIds).flat();

    const doc = inlineSchemaRefs((await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, Record<string, any>> });
    const operations: Operation[] = [];
    for (const [path, methods] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(methods)) {
        operations.push({ method: method.toUpperCase(), path, parameters: op.parameters ?? [], body: op.requestBody?.content?.['application/json']?.schema });
      }
    }
    expect(operations.length).toBeGreaterThan(20);

    const pathValue = (name: string) =>
      fc.oneof(
        { weight: 3, arbitrary: fc.constantFrom(...(realIds[name] ?? allIds)) },
        { weight: 2, arbitrary: fc.uuid() },
        { weight: 2, arbitrary: fc.string({ maxLength: 50 }) },
        {
          weight: 1,
          arbitrary: fc.constantFrom('..', '%', 'null', '0', '-1', 'x'.repeat(5000), '00000000-0000-0000-0000-000000000000', allIds[0]!.toUpperCase()),
        },
      );
    const queryValue = (schema: JsonSchema | undefined) =>
      fc.oneof(
        arbitraryFor(schema ?? {}, allIds).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))),
        fc.string({ maxLength: 30 }),
        fc.constantFrom('-1', '0', '101', '1e9', '99999999999999999999', 'NaN', '', 'true', '[]', 'x'.repeat(10_000), 'DEPLOYED,NOPE'),
      );
    const headerValue = fc.oneof(
      fc.string({ maxLength: 40 }).map((s) => s.replace(/[^\x20-\x7e]/g, '')),
      fc.constantFrom('wait=1', 'wait=-1', 'wait=abc', 'wait=0.01', '"x.1"', '*', 'W/"a"'),
    );

    const caseFor = (op: Operation): fc.Arbitrary<Case> => {
      const pathParams = op.parameters.filter((p) => p.in === 'path');
      const queryParams = op.parameters.filter((p) => p.in === 'query');
      return fc
        .record({
          params: fc.tuple(...pathParams.map((p) => pathValue(p.name))),
          query: fc.tuple(...queryParams.map((p) => fc.option(queryValue(p.schema), { nil: undefined }))),
          extraQuery: fc.option(fc.tuple(fc.string({ minLength: 1, maxLength: 10 }), fc.string({ maxLength: 10 })), { nil: undefined }),
          body: op.body
            ? fc.option(breakBody(arbitraryFor(op.body, allIds)), { nil: undefined, freq: 10 })
            : fc.option(breakBody(fc.jsonValue({ maxDepth: 2 })), { nil: undefined, freq: 2 }),
          auth: fc.constantFrom('key', 'key', 'key', 'key', 'key', 'bearer', 'none', 'wrong'),
          tenant: fc.oneof({ weight: 8, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.oneof(fc.uuid(), headerValue) }),
          conditional: fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.tuple(headerValue, headerValue) }),
        })
        .map(({ params, query, extraQuery, body, auth, tenant, conditional }) => {
          let path = op.path;
          pathParams.forEach((p, i) => (path = path.replace(`{${p.name}}`, encodeURIComponent(params[i]!))));
          const search = new URLSearchParams();
          queryParams.forEach((p, i) => query[i] !== undefined && search.set(p.name, query[i]!));
          if (extraQuery) search.append(extraQuery[0], extraQuery[1]);
          const headers: Record<string, string> = {};
          if (auth === 'key') headers['x-api-key'] = server.apiKey;
          if (auth === 'bearer') headers.authorization = `Bearer ${server.apiKey}`;
          if (auth === 'wrong') headers['x-api-key'] = 'not-a-key';
          if (tenant !== undefined) headers['x-tenant-id'] = tenant;
          if (conditional) {
            headers['if-none-match'] = conditional[0];
            headers.prefer = conditional[1];
          }
          if (body?.contentType) headers['content-type'] = body.contentType;
          return { op, path, query: search.toString(), headers, body, why: `${auth} auth; ${body?.why ?? 'no body'}` };
        });
    };
    // Built once per route: building the arbitraries is the slow part of generating a case.
    const anyCase = fc.oneof(...operations.map(caseFor));

    db = new Database(server.databasePath, { readonly: true });
    const settle = async () => {
      // After an accepted write the pipeline takes its first steps; wait until the file holds still.
      let previous = fingerprint(db);
      for (;;) {
        await new Promise((r) => setTimeout(r, 10));
        const now = fingerprint(db);
        if (now === previous) return now;
        previous = now;
      }
    };
    let state = await settle();
    const statuses = new Map<number, number>();
    let tried = 0;

    await fc.assert(
      fc.asyncProperty(anyCase, async (c) => {
        tried += 1;
        const method = c.op.method;
        const url = `${server.url}${c.path}${c.query ? `?${c.query}` : ''}`;
        let status: number;
        try {
          const response = await fetch(url, {
            method,
            headers: c.headers,
            body: method === 'GET' || method === 'HEAD' ? undefined : c.body?.bytes,
            signal: AbortSignal.timeout(10_000),
          });
          await response.arrayBuffer();
          status = response.status;
        } catch (error) {
          // A body over the limit may be cut off while it is still being sent; anything else is a failure.
          if ((c.body?.bytes?.length ?? 0) > 1024 * 1024) status = 413;
          else throw new Error(`${method} ${c.path}: ${String(error)} (${c.why})`);
        }
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        expect(status, `${method} ${c.path}?${c.query.slice(0, 200)} (${c.why})`).toBeLessThan(500);
        if (status >= 200 && status < 300 && method !== 'GET') {
          state = await settle();
        } else {
          expect(fingerprint(db) === state, `${method} ${c.path} answered ${status} but changed the database (a GET never may) (${c.why})`).toBe(true);
        }
      }),
      { numRuns: RUNS, endOnFailure: true },
    );

    const health = await fetch(`${server.url}/healthz`);
    expect(health.status).toBe(200);
    expect(server.output()).not.toMatch(/"level":"error"/);
    console.log(
      `fuzz: ${tried} requests over ${operations.length} routes; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`,
    );
    expect(tried).toBe(RUNS);
  });
});
