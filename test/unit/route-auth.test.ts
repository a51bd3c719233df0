import { generateKeyPairSync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AppEnv, RouteContext } from '../../server/http/env.ts';
import { OpenApiRegistry, type RouteDoc } from '../../server/http/openapi.ts';
import { page, route } from '../../server/http/route.ts';
import { declaredAuthOf } from '../../server/http/route-auth.ts';
import { inProcessApp } from '../helpers/in-process.ts';

const FIXTURE = resolve(import.meta.dirname, '../fixtures/routes/public-routes.txt');
/** The fixture's lines: `METHOD path auth-kind`, the routes that take no API key. */
const PUBLIC_ROUTES = readFileSync(FIXTURE, 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '' && !line.startsWith('#'));

type Registered = { method: string; path: string; handler: object };

/** Global middleware (`app.use('*')`): the only entries that declare nothing, as they answer no request themselves. */
const isGlobalMiddleware = (r: Registered) => r.method === 'ALL' && (r.path === '*' || r.path === '/*');

/** Every route of `app` that answers requests but was registered without a declared auth. */
function undeclared(app: { routes: Registered[] }): string[] {
  return app.routes.filter((r) => !isGlobalMiddleware(r) && declaredAuthOf(r.handler) === undefined).map((r) => `${r.method} ${r.path}`);
}

/** `METHOD path kind` for each route that declares another auth than an API key, once each, in registration order. */
function publicRoutes(app: { routes: Registered[] }): string[] {
  const lines = app.routes
    .filter((r) => !isGlobalMiddleware(r) && declaredAuthOf(r.handler) !== 'api-key')
    .map((r) => `${r.method} ${r.path} ${declaredAuthOf(r.handler)}`);
  return [...new Set(lines)];
}

describe("each route's auth comes from its declaration", () => {
  let server: Awaited<ReturnType<typeof inProcessApp>>;

  beforeAll(async () => {
    // With GitHub App settings, so the App's routes (setup, link confirmation) are registered too.
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    server = await inProcessApp({
      env: { GITHUB_APP_ID: '1', GITHUB_APP_PRIVATE_KEY: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), GITHUB_APP_SLUG: 'cp-test' },
    });
  });
  afterAll(() => server?.close());

  it('every route of the whole app declares its auth', () => {
    expect(server.app.routes.length).toBeGreaterThan(100);
    expect(undeclared(server.app)).toEqual([]);
  });

  it("the routes without an API key are the ones they were before issue 34 (the fixture's list)", () => {
    expect(publicRoutes(server.app)).toEqual(PUBLIC_ROUTES);
  });

  it('without a key, a route declared api-key answers 401 from the middleware, and no other route does', async () => {
    const missingKey = (await (await server.app.request('/v2/no-such-route')).json()) as { detail: string };
    expect(missingKey.detail).toMatch(/Missing API key/);
    const answers: string[] = [];
    for (const r of server.app.routes) {
      if (isGlobalMiddleware(r)) continue;
      const path = r.path.replace(/:\w+/g, '00000000-0000-4000-8000-000000000000').replace(/\*$/, 'anything');
      const response = await server.app.request(path, { method: r.method === 'ALL' ? 'GET' : r.method });
      const text = await response.text();
      const askedForKey = response.status === 401 && text.includes(missingKey.detail);
      if (askedForKey !== (declaredAuthOf(r.handler) === 'api-key')) answers.push(`${r.method} ${r.path}: ${response.status} ${text.slice(0, 80)}`);
    }
    expect(answers).toEqual([]);
  });

  it('a path no route answers takes a key under /v1 and /v2 (unknown paths cannot be probed), and none elsewhere', async () => {
    expect((await server.app.request('/v1/no-such-route')).status).toBe(401);
    expect((await server.app.request('/v2/listeners/x/agent/no-such-route')).status).toBe(401);
    expect((await server.app.request('/no-such-route')).status).toBe(404);
  });
});

describe('a route added without a declaration fails', () => {
  const ctx = (): RouteContext => ({ app: new Hono<AppEnv>(), docs: new OpenApiRegistry(), services: {} as never });
  const doc = { method: 'get', path: '/v2/things', summary: 's', tag: 't', response: { status: 200, schema: z.object({}) } } as const;

  it('route() and page() refuse to register it', () => {
    expect(() => route(ctx(), doc as unknown as RouteDoc, (c) => c.json({}))).toThrow(/GET \/v2\/things declares no auth/);
    expect(() => route(ctx(), { ...doc, auth: 'public' } as unknown as RouteDoc, (c) => c.json({}))).toThrow(/declares no auth/);
    expect(() => page(ctx(), { method: 'get', path: '/p' } as never, (c) => c.text(''))).toThrow(/GET \/p declares no auth/);
  });

  it('a handler put on the app directly is found by the check above', () => {
    const context = ctx();
    context.app.use('*', async (_c, next) => next());
    route(context, { ...doc, auth: 'api-key' }, (c) => c.json({}));
    context.app.get('/v2/sneaked-in', (c) => c.json({}));
    expect(undeclared(context.app)).toEqual(['GET /v2/sneaked-in']);
  });
});
