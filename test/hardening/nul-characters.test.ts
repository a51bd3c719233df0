import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arbitraryFor, inlineSchemaRefs, type JsonSchema } from '../fault/fuzz/json-schema-arbitrary.ts';
import { agentCall } from '../helpers/agent-call.ts';
import { testBackendKind } from '../helpers/backends.ts';
import { dockerBody, githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * One rule for text on both backends (PostgreSQL cannot store NUL in text or jsonb; SQLite can):
 * a NUL in any string the API takes is 422 naming the field, and changes nothing; an agent's log
 * lines and status messages quote build output, so theirs is sanitised and the report lands.
 * Runs on the backend of the project (`postgres` runs it through vitest.config.ts).
 */

type App = Awaited<ReturnType<typeof inProcessApp>>;

/**
 * How many rows each table a request could add to holds, as one string: a refused request adds
 * nothing (a count, not the rows: lease columns move on their own, and the fuzz is about writes
 * that fail half-way, which on PostgreSQL would have answered 500). Every table named exists: a
 * missing one fails the test (it used to be counted as "absent", which checked nothing and, on
 * PostgreSQL, cost a reconnection per refused statement).
 */
async function fingerprint(t: App): Promise<string> {
  const tables = [
    'deployments',
    'revisions',
    'revision_logs',
    'tracing_projects',
    'listeners',
    'listener_tokens',
    'agent_claims',
    'api_keys',
    'workspaces',
    'github_integrations',
    'github_trust_entries',
    'uploads',
    'oauth_providers',
    'oauth_tokens',
    'oauth_flows',
  ];
  // One statement, one round trip to PostgreSQL per check.
  const counts = await t.sql.get(`SELECT ${tables.map((table) => `(SELECT COUNT(*) FROM ${table}) AS ${table}`).join(', ')}`);
  return JSON.stringify(counts);
}

describe(`NUL characters in text (${testBackendKind()})`, () => {
  let t: App;
  let fx: { integrationId: string; listenerId: string };
  beforeAll(async () => {
    t = await inProcessApp({ env: { AGENT_LEASE_MS: '5000' } });
    fx = await workspaceFixtures(t.api);
  });
  afterAll(() => t.close());

  it('refuses a NUL in a name, a secret value, an OAuth field, a form field, a query value or a path with 422 naming it, and stores nothing', async () => {
    const before = await fingerprint(t);
    const name = await t.api.post('/v2/deployments', githubBody('nul\u0000name', fx.integrationId));
    expect(name.status).toBe(422);
    expect(name.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'name'], type: 'string_pattern_mismatch' })]);
    const secret = await t.api.post('/v2/deployments', githubBody(uniqueName('nul'), fx.integrationId, { secrets: [{ name: 'TOKEN', value: 'a\u0000b' }] }));
    expect(secret.status).toBe(422);
    expect(secret.body.detail[0].loc).toEqual(['body', 'secrets', 0, 'value']);
    const provider = await t.api.post('/v2/auth/providers', {
      provider_id: 'nul-provider',
      name: 'x\u0000',
      client_id: 'c',
      client_secret: 's',
      auth_url: 'https://idp.example.com/auth',
      token_url: 'https://idp.example.com/token',
    });
    expect(provider.status).toBe(422);
    expect(provider.body.detail[0].loc).toEqual(['body', 'name']);
    const key = await t.api.post('/v1/api-keys', { workspace_id: null, description: 'ok', 'sneaky\u0000key': 1 });
    expect(key.status).toBe(422);
    expect(key.body.detail[0].loc).toEqual(['body', 'sneaky\u0000key']);
    const query = await t.api.get('/v2/deployments?name_contains=%00');
    expect(query.status).toBe(422);
    expect(query.body.detail[0].loc).toEqual(['query', 'name_contains']);
    const form = await t.app.request('/v2/auth/callback', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'state=abc&error_description=x%00y',
    });
    expect(form.status).toBe(422);
    expect(((await form.json()) as { detail: Array<{ loc: unknown[] }> }).detail[0]!.loc).toEqual(['body', 'error_description']);
    const path = await t.api.get('/v2/auth/providers/a%00b');
    expect(path.status).toBe(422);
    expect(path.body.detail[0].loc).toEqual(['path']);
    expect(await fingerprint(t)).toBe(before);
  });

  it('stores an agent’s log lines and failure message whatever control characters they hold, so the revision ends and the next one runs', async () => {
    const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: uniqueName('nul-machine') });
    const token = (await t.api.post(`/v2/listeners/${listener.body.id}/tokens`)).body.token as string;
    // A deployment on an agent's listener: its agent reports the stages (the same calls a build makes).
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('nulreport'), listener.body.id));
    expect(created.status).toBe(201);
    const claim = await agentCall(t.app, listener.body.id, token, '/claim', { agent_id: 'a1', wait_seconds: 0 });
    expect(claim.body.work.revision.status).toBe('AWAITING_DEPLOY');
    const claimPath = `/claims/${claim.body.work.claim_id}`;
    expect((await agentCall(t.app, listener.body.id, token, `${claimPath}/transition`, { from: 'AWAITING_DEPLOY', to: 'DEPLOYING' })).status).toBe(200);
    const output = 'npm ERR! \u0000\u0001binary\u001b[31m red\u001b[0m\r\nnext\tline\u007f';
    const logs = await agentCall(t.app, listener.body.id, token, `${claimPath}/logs`, { lines: [{ type: 'deploy', level: 'error', message: output }] });
    expect(logs.status).toBe(204);
    const failed = await agentCall(t.app, listener.body.id, token, `${claimPath}/transition`, {
      from: 'DEPLOYING',
      to: 'DEPLOY_FAILED',
      status_message: `failed: ${output}`,
    });
    expect(failed.status).toBe(200);
    expect(failed.body.status).toBe('DEPLOY_FAILED');
    expect(failed.body.status_message).toBe('failed: npm ERR! \uFFFD\uFFFDbinary red\nnext\tline\uFFFD');
    const stored = await t.api.get(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}/logs?type=deploy`);
    expect(stored.body.logs.map((l: { message: string }) => l.message)).toContain('npm ERR! \uFFFD\uFFFDbinary red\nnext\tline\uFFFD');
    // The claim ended with the revision: nothing comes back to be rebuilt.
    expect((await agentCall(t.app, listener.body.id, token, '/claim', { agent_id: 'a1', wait_seconds: 0 })).body.work).toBeNull();
  });

  it('fuzz: a NUL put into any string or key of any route’s body or query is never a 5xx, is 422 naming it, and changes nothing', async () => {
    const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: uniqueName('fuzz-machine') });
    const agentToken = (await t.api.post(`/v2/listeners/${listener.body.id}/tokens`)).body.token as string;
    const doc = inlineSchemaRefs((await (await t.app.request('/openapi.json')).json()) as { paths: Record<string, Record<string, any>> });
    const ids = [fx.integrationId, fx.listenerId, listener.body.id];
    type Op = { method: string; path: string; body?: JsonSchema; query: Array<{ name: string; schema?: JsonSchema }> };
    const ops: Op[] = [];
    for (const [path, methods] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(methods)) {
        const body = op.requestBody?.content?.['application/json']?.schema as JsonSchema | undefined;
        const query = (op.parameters ?? []).filter((p: { in: string }) => p.in === 'query');
        if (body || query.length > 0) ops.push({ method: method.toUpperCase(), path, body, query });
      }
    }
    expect(ops.length).toBeGreaterThan(20);
    const fillPath = (path: string) => path.replace('{listener_id}', listener.body.id).replace(/\{[^}]+\}/g, () => crypto.randomUUID());
    // The agent's log lines and status messages are kept and sanitised, not refused.
    const keptText = (path: string, loc: Array<string | number>) =>
      (path.endsWith('/logs') && loc.at(-1) === 'message') || (path.endsWith('/transition') && loc.at(-1) === 'status_message');

    const caseOf = (op: Op) =>
      fc
        .record({
          value: op.body ? arbitraryFor(op.body, ids) : fc.constant(undefined),
          queryValues: fc.tuple(
            ...op.query.map((p) => arbitraryFor(p.schema ?? { type: 'string' }, ids).map((v) => (typeof v === 'string' ? v : JSON.stringify(v)))),
          ),
          pick: fc.nat(),
          at: fc.nat(),
          inKey: fc.boolean(),
        })
        .map((c) => ({ op, ...c }));
    const statuses = new Map<number, number>();
    let requests = 0;
    let before = await fingerprint(t);
    await fc.assert(
      fc.asyncProperty(fc.oneof(...ops.map(caseOf)), async ({ op, value, queryValues, pick, at, inKey }) => {
        const insert = (text: string) => `${text.slice(0, at % (text.length + 1))}\u0000${text.slice(at % (text.length + 1))}`;
        // Where the NUL goes: one string (or key) of the body, else one query value.
        const places: Array<{ loc: Array<string | number>; set: (nul: (s: string) => string) => void }> = [];
        // fast-check's objects sometimes carry an own `__proto__` key, which is refused too
        // (server/http/validation.ts): the first problem met in the walk is the one named.
        const protoKeys: Array<Array<string | number>> = [];
        const walk = (node: unknown, loc: Array<string | number>) => {
          if (node === null || typeof node !== 'object') return;
          if (!Array.isArray(node) && Object.hasOwn(node, '__proto__')) protoKeys.push([...loc, '__proto__']);
          for (const [key, child] of Object.entries(node)) {
            const childLoc = [...loc, Array.isArray(node) ? Number(key) : key];
            if (typeof child === 'string') places.push({ loc: childLoc, set: (nul) => ((node as Record<string, unknown>)[key] = nul(child)) });
            if (inKey && !Array.isArray(node))
              places.push({ loc: [...loc, `${key}\u0000`], set: () => ((node as Record<string, unknown>)[`${key}\u0000`] = child) });
            walk(child, childLoc);
          }
        };
        const body = value === undefined ? undefined : structuredClone(value);
        walk(body, ['body']);
        const search = new URLSearchParams();
        op.query.forEach((p, i) => {
          search.set(p.name, queryValues[i]!);
          places.push({ loc: ['query', p.name], set: (nul) => search.set(p.name, nul(search.get(p.name) ?? '')) });
        });
        if (places.length === 0) return;
        const place = places[pick % places.length]!;
        place.set(insert);
        const agentRoute = op.path.includes('/agent/');
        const response = await t.app.request(`${fillPath(op.path)}${search.size ? `?${search}` : ''}`, {
          method: op.method,
          headers: {
            ...(agentRoute ? { authorization: `Bearer ${agentToken}` } : { 'x-api-key': t.apiKey }),
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          body: body === undefined || op.method === 'GET' ? undefined : JSON.stringify(body),
        });
        const answer = (await response.json().catch(() => null)) as { detail?: Array<{ loc: unknown[] }> } | null;
        requests += 1;
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        const where = `${op.method} ${op.path} with NUL at ${JSON.stringify(place.loc)}: ${response.status} ${JSON.stringify(answer).slice(0, 300)}`;
        expect(response.status, where).toBeLessThan(500);
        // Webhook routes are signature-checked before anything is read: 401 is their answer.
        if (keptText(op.path, place.loc) || (op.path.includes('/webhooks/') && response.status === 401)) {
          before = await fingerprint(t);
          return;
        }
        expect(response.status, where).toBe(422);
        expect([place.loc, ...protoKeys], where).toContainEqual(answer?.detail?.[0]?.loc);
        const after = await fingerprint(t);
        expect(after, where).toBe(before);
        before = after;
      }),
      { numRuns: 600, endOnFailure: true },
    );
    console.log(
      `nul fuzz (${testBackendKind()}): ${requests} requests over ${ops.length} operations; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`,
    );
  });
});
