import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * The callback's other forms (contract §8): `POST` (a provider's `response_mode=form_post`, or a
 * front end handing on `{code, state}` as JSON) and `/v2/auth/callback/{provider_id}`. The token
 * endpoint is simulated by a small HTTP server on loopback that issues a token for any code; the
 * full flow against a real authorization server is in oauth-flow.test.ts and the SDK test.
 */
let server: Server;
let port: number;
let issued = 0;
let ctx: Awaited<ReturnType<typeof inProcessApp>>;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      issued += 1;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: `token-${issued}`, token_type: 'Bearer', expires_in: 3600 }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  ctx = await inProcessApp({ env: { OAUTH_ALLOWED_HOSTS: '127.0.0.1' } });
  const created = await ctx.api.post('/v2/auth/providers', {
    provider_id: 'idp',
    name: 'IdP',
    client_id: 'client',
    client_secret: 'secret-0123456789',
    auth_url: `http://127.0.0.1:${port}/authorize`,
    token_url: `http://127.0.0.1:${port}/token`,
  });
  expect(created.status).toBe(200);
});
afterAll(async () => {
  ctx.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

async function start(userId: string) {
  const started = (await ctx.api.post('/v2/auth/authenticate', { provider: 'idp', scopes: ['read'], user_id: userId })).body;
  return { authId: started.auth_id as string, state: new URL(started.url).searchParams.get('state')! };
}

describe('callback forms', () => {
  it('POST form-encoded (form_post) completes the flow, with the HTML page', async () => {
    const { authId, state } = await start('form');
    const response = await ctx.app.request('/v2/auth/callback', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ code: 'c1', state }).toString(),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/text\/html/);
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body).toMatchObject({ status: 'completed', token: expect.stringMatching(/^token-/) });
  });

  it('POST JSON {code, state} at /v2/auth/callback/{provider_id} completes the flow without an API key, answered with JSON', async () => {
    const { authId, state } = await start('json');
    const response = await ctx.app.request('/v2/auth/callback/idp', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'c2', state }),
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'completed', message: 'Authorization complete.' });
    // The same state again: used up, said in the API's error shape.
    const again = await ctx.app.request('/v2/auth/callback/idp', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'c2', state }),
    });
    expect(again.status).toBe(400);
    expect(await again.json()).toEqual({ detail: 'This authorization was already used.' });
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body.status).toBe('completed');
  });

  it('GET /v2/auth/callback/{provider_id} completes; another provider_id in the path is refused and changes nothing', async () => {
    const { authId, state } = await start('path');
    const wrong = await ctx.app.request(`/v2/auth/callback/not-idp?state=${state}&code=c3`);
    expect(wrong.status).toBe(400);
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body.status).toBe('pending');
    const right = await ctx.app.request(`/v2/auth/callback/idp?state=${state}&code=c3`);
    expect(right.status).toBe(200);
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body.status).toBe('completed');
  });

  it('a POST without a state, or with a body that is too large, is a 4xx and no flow changes', async () => {
    const empty = await ctx.app.request('/v2/auth/callback', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'code=x',
    });
    expect(empty.status).toBe(400);
    const big = await ctx.app.request('/v2/auth/callback', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `code=${'x'.repeat(20_000)}`,
    });
    expect(big.status).toBe(413);
    const bigJson = await ctx.app.request('/v2/auth/callback', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'x'.repeat(20_000), state: 'y' }),
    });
    expect(bigJson.status).toBe(413);
  });

  it('the token routes of the workspace: list, metadata, delete one, exists', async () => {
    const { authId, state } = await start('routes');
    expect((await ctx.app.request(`/v2/auth/callback?state=${state}&code=c4`)).status).toBe(200);
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body.status).toBe('completed');
    const listed = (await ctx.api.get('/v2/auth/tokens?provider_id=idp')).body as Array<Record<string, unknown>>;
    const mine = listed.find((t) => t.user_id === 'routes')!;
    expect(mine).toEqual({
      id: expect.any(String),
      provider_id: 'idp',
      user_id: 'routes',
      agent_id: null,
      provider_account_label: null,
      scopes: ['read'],
      expires_at: expect.any(String),
      is_default: true,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    expect(JSON.stringify(listed)).not.toMatch(/token-\d/);
    const patched = await ctx.api.patch(`/v2/auth/tokens/${mine.id}/metadata`, { provider_account_label: 'alice@example.com', is_default: false });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id: mine.id, provider_account_label: 'alice@example.com', is_default: false });
    expect((await ctx.api.patch(`/v2/auth/tokens/${mine.id}/metadata`, { is_default: 'yes' })).status).toBe(422);
    expect((await ctx.api.get('/v2/auth/tokens/exists?provider_id=idp&user_id=routes')).body).toEqual({ exists: true, has_token: true });
    expect((await ctx.api.delete(`/v2/auth/tokens/${mine.id}`)).status).toBe(204);
    expect((await ctx.api.delete(`/v2/auth/tokens/${mine.id}`)).status).toBe(404);
    expect((await ctx.api.get('/v2/auth/tokens/exists?provider_id=idp&user_id=routes')).body).toEqual({ exists: false, has_token: false });
    expect((await ctx.api.get('/v2/auth/tokens/exists?provider_id=no-such')).body).toEqual({ exists: false, has_token: false });
    expect((await ctx.api.delete('/v2/auth/tokens?provider_id=no-such')).status).toBe(404);
    expect((await ctx.api.get('/v2/auth/tokens/exists')).status).toBe(422);
    const all = await ctx.api.delete('/v2/auth/tokens?provider_id=idp');
    expect(all.status).toBe(200);
    expect(all.body.deleted).toBeGreaterThan(0);
    expect((await ctx.api.get('/v2/auth/tokens')).body).toEqual([]);
  });

  it('force_new starts a flow even with a usable token; token_id picks a token of the workspace', async () => {
    const { authId, state } = await start('force');
    expect((await ctx.app.request(`/v2/auth/callback?state=${state}&code=c5`)).status).toBe(200);
    const token = (await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body.token;
    const byId = (await ctx.api.get('/v2/auth/tokens?provider_id=idp')).body.find((t: { user_id: string }) => t.user_id === 'force');
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: 'idp', scopes: ['read'], user_id: 'force', force_new: true })).body.status).toBe('pending');
    const picked = await ctx.api.post('/v2/auth/authenticate', { provider: 'idp', scopes: ['read'], token_id: byId.id });
    expect(picked.body).toMatchObject({ status: 'completed', token, metadata: { token_id: byId.id } });
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: 'idp', scopes: ['read'], token_id: crypto.randomUUID() })).status).toBe(404);
  });
});
