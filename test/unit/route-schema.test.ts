import { generateKeyPairSync } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Unauthorized } from '../../server/domain/errors.ts';
import type { AppEnv, RouteContext } from '../../server/http/env.ts';
import { errorResponse } from '../../server/http/errors.ts';
import { OpenApiRegistry } from '../../server/http/openapi.ts';
import { route } from '../../server/http/route.ts';
import { silentLogger } from '../../server/logger.ts';
import { inlineSchemaRefs, type JsonSchema } from '../fault/fuzz/json-schema-arbitrary.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * One schema per route (issue 34): `route()` validates what the route's doc declares and hands it
 * to the handler, so a handler reading input its doc does not declare, or a declared schema that
 * is not applied, fails here.
 */

type Operation = {
  method: string;
  path: string;
  parameters?: Array<{ in: string; name: string; schema?: JsonSchema & Record<string, unknown> }>;
  requestBody?: { content: Record<string, unknown> };
  security?: unknown[];
  'x-reads-own-input'?: string;
};

type Issue = { loc: Array<string | number>; type: string };

const SERVER = resolve(import.meta.dirname, '../../server');
const SOME_UUID = '00000000-0000-4000-8000-000000000000';

/** The routes that read their own input (the escape hatch), as their docs say: these and no others. */
const READ_OWN_INPUT = [
  'DELETE /v2/deployments',
  'GET /v2/auth/callback',
  'POST /v2/auth/callback',
  'GET /v2/auth/callback/{provider_id}',
  'POST /v2/auth/callback/{provider_id}',
  'GET /v2/listeners/{listener_id}/agent/claims/{claim_id}/source',
  'POST /v1/webhooks/github',
  'POST /v1/webhooks/github/workspaces/{workspace_id}',
  'PUT /v1/uploads/{upload_id}',
].sort();

/** Query parameters that are optional strings of any text: nothing a client sends can violate them. */
const ANY_TEXT_QUERIES = ['GET /v1/integrations/github/setup'];

/** What only `route()` (or a route that declares `ownInput`) may call to read a request's input. */
const RAW_INPUT_READS =
  /\b(readJson|readQuery|validate|pathId|validateIgnoringUnknown)\(|c\.req\.(query|queries|param|json|parseBody|text|arrayBuffer|formData)\(|c\.req\.raw\.body/;

/** `server/**\/*.ts`, relative to server/. */
function serverFiles(dir = SERVER): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'dist' || entry.name === 'node_modules' ? [] : serverFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Each `route(` call's text, up to the next registration (or the end of its file), with its file. */
function routeRegistrations(): Array<{ file: string; text: string }> {
  const found: Array<{ file: string; text: string }> = [];
  for (const file of serverFiles()) {
    if (file.endsWith(join('http', 'route.ts'))) continue;
    const source = readFileSync(file, 'utf8');
    const starts = [...source.matchAll(/(?<![.\w])(route|page)\(\s*ctx\b/g)].map((m) => m.index!);
    starts.forEach((start, i) => {
      const text = source.slice(start, starts[i + 1] ?? source.length);
      if (text.startsWith('route(')) found.push({ file: file.slice(SERVER.length + 1), text });
    });
  }
  return found;
}

/** A query parameter's schema that some text violates (a number, an enum, a format, a length, a pattern). */
function isConstrained(schema: Record<string, unknown> | undefined): boolean {
  if (!schema) return false;
  if (schema.anyOf || schema.oneOf) return ((schema.anyOf ?? schema.oneOf) as Array<Record<string, unknown>>).every(isConstrained);
  return schema.type !== 'string' || ['enum', 'const', 'format', 'pattern', 'minLength', 'maxLength'].some((key) => key in schema);
}

describe("every route's handler reads only what its doc declares", () => {
  it('no route() handler reads the request itself, unless its doc says why (ownInput)', () => {
    const registrations = routeRegistrations();
    expect(registrations.length).toBeGreaterThan(60);
    const offenders = registrations
      .filter(({ text }) => !/\bownInput:/.test(text) && RAW_INPUT_READS.test(text))
      .map(({ file, text }) => `${file}: ${/path: ([^,\n]+)/.exec(text)?.[1]} reads ${RAW_INPUT_READS.exec(text)?.[0]}`);
    expect(offenders).toEqual([]);
  });

  it('the check above finds a handler that reads a body its doc does not declare', () => {
    const sneaky = "route(ctx, { auth: 'api-key', method: 'post', path: '/v2/x' }, async (c) => c.json(await readJson(c, Thing)))";
    expect(RAW_INPUT_READS.test(sneaky)).toBe(true);
    expect(RAW_INPUT_READS.test("route(ctx, { path: '/v2/x' }, async (c, { body }) => c.body(null, 204))")).toBe(false);
  });
});

describe('every documented route applies the schemas its doc declares (walked over the served OpenAPI document)', () => {
  let server: Awaited<ReturnType<typeof inProcessApp>>;
  let operations: Operation[];
  let listenerId: string;
  let listenerToken: string;

  beforeAll(async () => {
    // With GitHub App settings, so the App's routes (the setup URL, the install URL) are walked too.
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    server = await inProcessApp({
      env: { GITHUB_APP_ID: '1', GITHUB_APP_PRIVATE_KEY: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), GITHUB_APP_SLUG: 'cp-test' },
    });
    const doc = inlineSchemaRefs((await (await server.app.request('/openapi.json')).json()) as { paths: Record<string, Record<string, Operation>> });
    operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({ ...op, method: method.toUpperCase(), path })),
    );
    const listener = await server.api.post('/v2/listeners', { compute_type: 'local', compute_id: `schema-${crypto.randomUUID().slice(0, 8)}` });
    listenerId = listener.body.id;
    listenerToken = (await server.api.post(`/v2/listeners/${listenerId}/tokens`)).body.token;
  });
  afterAll(() => server?.close());

  /** A request to `op` with every path parameter a well-formed value but `bad` (set to `badValue`), and the caller's credential. */
  const request = (op: Operation, init: { bad?: string; badValue?: string; query?: string; body?: string }) => {
    const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
      if (name === init.bad) return encodeURIComponent(init.badValue!);
      return name === 'listener_id' ? listenerId : name === 'provider_id' ? 'some-provider' : SOME_UUID;
    });
    const headers: Record<string, string> = op.path.includes('/agent') ? { authorization: `Bearer ${listenerToken}` } : { 'x-api-key': server.apiKey };
    if (init.body !== undefined) headers['content-type'] = 'application/json';
    return server.app.request(`${path}${init.query ? `?${init.query}` : ''}`, { method: op.method, headers, body: init.body });
  };
  const issuesOf = async (response: Response): Promise<{ status: number; issues: Issue[] }> => {
    const text = await response.text();
    return { status: response.status, issues: response.status === 422 ? (JSON.parse(text) as { detail: Issue[] }).detail : [] };
  };
  const checked = (op: Operation) => !op['x-reads-own-input'];

  it('the routes that read their own input are the documented escape hatches, each with its reason', () => {
    const own = operations.filter((op) => !checked(op));
    expect(own.map((op) => `${op.method} ${op.path}`).sort()).toEqual(READ_OWN_INPUT);
    for (const op of own) expect(op['x-reads-own-input']!.length).toBeGreaterThan(20);
  });

  it('a body that violates the declared schema is 422 at ["body"], on every route that declares one', async () => {
    const failures: string[] = [];
    let walked = 0;
    for (const op of operations.filter((op) => checked(op) && op.requestBody?.content['application/json'])) {
      walked += 1;
      // A JSON array where every route's body is an object: a violation of any body schema.
      const { status, issues } = await issuesOf(await request(op, { body: '[1]' }));
      if (status !== 422 || issues[0]?.loc[0] !== 'body') failures.push(`${op.method} ${op.path}: ${status} ${JSON.stringify(issues)}`);
    }
    expect(walked).toBeGreaterThan(20);
    expect(failures).toEqual([]);
  });

  it('a query parameter that violates the declared schema is 422 at ["query", name], on every route that declares one', async () => {
    const failures: string[] = [];
    const unconstrained: string[] = [];
    let walked = 0;
    for (const op of operations.filter(checked)) {
      const params = (op.parameters ?? []).filter((p) => p.in === 'query');
      if (params.length === 0) continue;
      const constrained = params.filter((p) => isConstrained(p.schema));
      if (constrained.length === 0) unconstrained.push(`${op.method} ${op.path}`);
      for (const param of constrained) {
        walked += 1;
        // Text that no number, enum value, uuid, date, pattern or bounded length takes.
        const value = `~${'x'.repeat(300)}~`;
        const { status, issues } = await issuesOf(
          await request(op, { query: new URLSearchParams({ [param.name]: value }).toString(), body: op.requestBody ? '{}' : undefined }),
        );
        const located = issues.some((issue) => issue.loc[0] === 'query' && issue.loc[1] === param.name);
        if (status !== 422 || !located) failures.push(`${op.method} ${op.path} ?${param.name}: ${status} ${JSON.stringify(issues)}`);
      }
    }
    expect(walked).toBeGreaterThan(10);
    expect(failures).toEqual([]);
    expect(unconstrained).toEqual(ANY_TEXT_QUERIES);
  });

  it('a path parameter that violates the declared schema (a uuid, a slug) is 422 at ["path", name], on every route', async () => {
    const failures: string[] = [];
    let walked = 0;
    for (const op of operations.filter(checked)) {
      for (const name of [...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!)) {
        walked += 1;
        const { status, issues } = await issuesOf(await request(op, { bad: name, badValue: 'not a~uuid!', body: op.requestBody ? '{}' : undefined }));
        if (status !== 422 || issues[0]?.loc[0] !== 'path' || issues[0]?.loc[1] !== name)
          failures.push(`${op.method} ${op.path} {${name}}: ${status} ${JSON.stringify(issues)}`);
      }
    }
    expect(walked).toBeGreaterThan(40);
    expect(failures).toEqual([]);
  });
});

describe('route() hands its handler the input its doc declares', () => {
  const app = () => {
    const hono = new Hono<AppEnv>();
    hono.onError((error, c) => errorResponse(error, c, { log: silentLogger }));
    return { app: hono, docs: new OpenApiRegistry(), services: {} as never } satisfies RouteContext;
  };
  const Thing = z.strictObject({ name: z.string(), count: z.coerce.number().int().optional() });
  const doc = {
    auth: 'api-key',
    method: 'post',
    path: '/v2/things/:thing_id',
    summary: 's',
    tag: 't',
    body: Thing,
    query: z.object({ dry: z.enum(['true', 'false']).default('false') }),
    response: { status: 200, schema: z.object({}) },
  } as const;

  it('params, query and body validated and typed from the doc; unknown body fields named in Warning', async () => {
    const ctx = app();
    route(ctx, doc, (c, { params, query, body }) => c.json({ id: params.thing_id, dry: query.dry, name: body.name }));
    const response = await ctx.app.request(`/v2/things/${SOME_UUID.toUpperCase()}?dry=true`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'n', extra: 1 }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ id: SOME_UUID, dry: 'true', name: 'n' });
    expect(response.headers.get('warning')).toBe('299 - "Unknown field ignored: body.extra"');
  });

  it('path before query before body, each 422 at its place; 415 and 413 as readJson answers them', async () => {
    const ctx = app();
    route(ctx, doc, (c) => c.json({}));
    const post = async (path: string, body: string, contentType = 'application/json') => {
      const response = await ctx.app.request(path, { method: 'POST', headers: { 'content-type': contentType }, body });
      return { status: response.status, body: (await response.json()) as { detail: Array<{ loc: unknown[] }> } };
    };
    expect((await post('/v2/things/x?dry=maybe', '[')).body.detail[0]?.loc).toEqual(['path', 'thing_id']);
    expect((await post(`/v2/things/${SOME_UUID}?dry=maybe`, '[')).body.detail[0]?.loc).toEqual(['query', 'dry']);
    expect((await post(`/v2/things/${SOME_UUID}`, '{"count": "x"}')).body.detail).toEqual([
      { loc: ['body', 'name'], msg: 'Field required', type: 'missing' },
      expect.objectContaining({ loc: ['body', 'count'] }),
    ]);
    expect((await post(`/v2/things/${SOME_UUID}`, 'name=n', 'application/x-www-form-urlencoded')).status).toBe(415);
    expect((await post(`/v2/things/${SOME_UUID}`, JSON.stringify({ name: 'x'.repeat(1024 * 1024) }))).status).toBe(413);
  });

  it('checkCaller runs before any input is read: a caller it refuses never has its body parsed', async () => {
    const ctx = app();
    let handled = false;
    route(
      ctx,
      { ...doc, auth: 'listener-token' },
      (c) => {
        handled = true;
        return c.json({});
      },
      () => {
        throw new Unauthorized('no token');
      },
    );
    const response = await ctx.app.request('/v2/things/not-a-uuid', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{not json' });
    expect(response.status).toBe(401);
    expect(handled).toBe(false);
  });

  it('emptyBody: a request without a body is the empty object, validated; an empty JSON text is still 422', async () => {
    const ctx = app();
    const Optional = z.object({ name: z.string().default('unnamed') });
    route(ctx, { ...doc, body: Optional, query: undefined, bodyReading: { emptyBody: 'empty-object' } }, (c, { body }) => c.json(body));
    const none = await ctx.app.request(`/v2/things/${SOME_UUID}`, { method: 'POST' });
    expect(await none.json()).toEqual({ name: 'unnamed' });
    const emptyJson = await ctx.app.request(`/v2/things/${SOME_UUID}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '' });
    expect(emptyJson.status).toBe(422);
  });

  it('ownInput: the handler is handed nothing and reads the request itself', async () => {
    const ctx = app();
    route(ctx, { ...doc, ownInput: 'a test of the escape hatch' }, async (c, input) => c.json({ input: input ?? null, raw: await c.req.text() }));
    const response = await ctx.app.request('/v2/things/not-a-uuid?dry=maybe', { method: 'POST', body: 'anything' });
    expect(await response.json()).toEqual({ input: null, raw: 'anything' });
    expect((ctx.docs.document().paths as Record<string, Record<string, Record<string, unknown>>>)['/v2/things/{thing_id}']!.post!['x-reads-own-input']).toBe(
      'a test of the escape hatch',
    );
  });
});
