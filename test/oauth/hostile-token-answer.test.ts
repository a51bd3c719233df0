import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * A token endpoint that answers 200 with nonsense (`"expires_in": "1e308"`, negative
 * or non-numeric lifetimes, a huge access_token, missing fields, not an object) must neither 500
 * the callback nor strand the flow: the flow fails with a reason that `wait` and the page show.
 * The hostile token endpoint is simulated by a small HTTP server on loopback that answers what
 * each case sets; the control plane is the real app.
 */

let answer: { status: number; contentType: string; body: string } = { status: 200, contentType: 'application/json', body: '{}' };
let server: Server;
let port: number;
let ctx: Awaited<ReturnType<typeof inProcessApp>>;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(answer.status, { 'content-type': answer.contentType });
      res.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
  ctx = await inProcessApp({ env: { OAUTH_ALLOWED_HOSTS: '127.0.0.1' } });
});
afterAll(async () => {
  ctx.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

let n = 0;
async function flowAgainst(body: string, contentType = 'application/json', status = 200) {
  answer = { status, contentType, body };
  n += 1;
  const provider = await ctx.api.post('/v2/auth/providers', {
    provider_id: `hostile-${n}`,
    name: 'Hostile',
    client_id: 'client',
    client_secret: 'secret-0123456789',
    auth_url: `http://127.0.0.1:${port}/authorize`,
    token_url: `http://127.0.0.1:${port}/token`,
  });
  expect(provider.status, JSON.stringify(provider.body)).toBe(200);
  const started = (await ctx.api.post('/v2/auth/authenticate', { provider: `hostile-${n}`, scopes: ['read'], user_id: 'u' })).body;
  const state = new URL(started.url).searchParams.get('state')!;
  const response = await ctx.app.request(`/v2/auth/callback?state=${state}&code=the-code`);
  const page = { status: response.status, type: response.headers.get('content-type') ?? '', html: await response.text() };
  const waited = (await ctx.api.get(`/v2/auth/wait/${started.auth_id}?timeout=0`)).body;
  const again = (await ctx.api.post('/v2/auth/authenticate', { provider: `hostile-${n}`, scopes: ['read'], user_id: 'u' })).body;
  return { page, waited, again };
}

const hugeToken = 'A'.repeat(100_000);

describe('hostile token answers', () => {
  it.each([
    ['expires_in as the string "1e308"', { access_token: 'tok', token_type: 'Bearer', expires_in: '1e308' }, 'expires_in'],
    ['expires_in as the number 1e308', { access_token: 'tok', expires_in: 1e308 }, 'expires_in'],
    ['a negative expires_in', { access_token: 'tok', expires_in: -60 }, 'expires_in'],
    ['a non-numeric expires_in', { access_token: 'tok', expires_in: 'soon' }, 'expires_in'],
    ['an expires_in object', { access_token: 'tok', expires_in: { a: 1 } }, 'expires_in'],
    ['a 100 kB access_token', { access_token: hugeToken, expires_in: 60 }, 'access_token'],
    ['no access_token', { token_type: 'Bearer', expires_in: 60 }, 'access_token'],
    ['an empty access_token', { access_token: '', expires_in: 60 }, 'access_token'],
    ['a numeric access_token', { access_token: 12345 }, 'access_token'],
    ['a refresh_token that is an object', { access_token: 'tok', refresh_token: { x: 1 } }, 'refresh_token'],
    ['a JSON array', [], 'not a JSON object'],
    ['JSON null', null, 'not a JSON object'],
  ])('%s: the page is a 4xx HTML page with the reason, and wait answers failed with it', async (_name, body, reason) => {
    const { page, waited, again } = await flowAgainst(JSON.stringify(body));
    expect(page.status).toBe(400);
    expect(page.type).toMatch(/text\/html/);
    expect(page.html).toContain('invalid_token_response');
    expect(page.html).toContain(reason);
    expect(page.html).not.toContain(hugeToken);
    expect(waited).toMatchObject({ status: 'failed', token: null, error: 'invalid_token_response', error_description: expect.stringContaining(reason) });
    // Nothing was stored: asking again starts a new flow rather than handing out the garbage.
    expect(again.status).toBe('pending');
  });

  it('a body that is not JSON at all, or larger than 256 KiB, fails the flow too (never a 500)', async () => {
    const garbage = await flowAgainst('<html>oops</html>', 'text/html');
    expect(garbage.page.status).toBe(400);
    expect(garbage.waited).toMatchObject({ status: 'failed', error: 'invalid_token_response' });
    const huge = await flowAgainst(JSON.stringify({ access_token: 'x'.repeat(300 * 1024) }));
    expect(huge.page.status).toBe(502);
    expect(huge.waited).toMatchObject({ status: 'failed', error: 'token_exchange_failed' });
  });

  it("a provider's long error_description is shown as a short excerpt, and kept only sealed", async () => {
    const long = `bad code ${'z'.repeat(5000)}`;
    const { page, waited } = await flowAgainst(JSON.stringify({ error: 'invalid_grant', error_description: long }), 'application/json', 400);
    expect(page.status).toBe(400);
    expect(waited.error).toBe('invalid_grant');
    expect(waited.error_description.length).toBeLessThanOrEqual(201);
    expect(waited.error_description.startsWith('bad code zzz')).toBe(true);
    expect(page.html).not.toContain('z'.repeat(300));
    const row = (await ctx.sql.prepare("SELECT error_description FROM oauth_flows WHERE error = 'invalid_grant'").get()) as { error_description: string };
    expect(row.error_description).toMatch(/^v1:/);
    expect(row.error_description).not.toContain('bad code');
  });

  it('a hostile answer to a refresh is not a 500 either: authenticate starts a new flow and keeps the refresh token', async () => {
    const first = await flowAgainst(JSON.stringify({ access_token: 'short-lived', expires_in: 1, refresh_token: 'refresh-1' }));
    expect(first.waited).toMatchObject({ status: 'completed', token: 'short-lived' });
    answer = { status: 200, contentType: 'application/json', body: JSON.stringify({ access_token: 'refreshed', expires_in: '1e308' }) };
    // Past half the token's one-second life, authenticate refreshes first.
    await new Promise((resolve) => setTimeout(resolve, 700));
    const asked = await ctx.api.post('/v2/auth/authenticate', { provider: `hostile-${n}`, scopes: ['read'], user_id: 'u' });
    expect(asked.status).toBe(200);
    expect(asked.body).toMatchObject({ status: 'pending', token: null });
    // The stored token was kept (a garbled answer may be the provider's passing fault): a good answer later refreshes it.
    answer = { status: 200, contentType: 'application/json', body: JSON.stringify({ access_token: 'refreshed', expires_in: 3600 }) };
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: `hostile-${n}`, scopes: ['read'], user_id: 'u' })).body).toMatchObject({
      status: 'completed',
      token: 'refreshed',
    });
  });

  it('the accepted forms still work: expires_in as a digit string, scope as a list, null fields', async () => {
    answer = { status: 200, contentType: 'application/json', body: '' };
    const { page, waited } = await flowAgainst(
      JSON.stringify({ access_token: 'good-token', expires_in: '3600', scope: ['read', 'write'], refresh_token: null, token_type: null }),
    );
    expect(page.status).toBe(200);
    expect(waited).toMatchObject({ status: 'completed', token: 'good-token' });
    const listed = (await ctx.api.get(`/v2/auth/tokens?provider_id=hostile-${n}`)).body;
    expect(listed).toEqual([expect.objectContaining({ scopes: ['read', 'write'], expires_at: expect.any(String) })]);
  });
});
