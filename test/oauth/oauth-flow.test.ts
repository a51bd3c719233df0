import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../server/crypto/api-key.ts';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { openRawSql } from '../helpers/raw-sql.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { type AuthorizationServer, startAuthorizationServer, type TestClient } from './authorization-server.ts';
import { Browser } from './browser.ts';

// Secrets with characters that form-encoding must carry: a wrong Basic or body encoding fails the exchange.
const CLIENTS = {
  pkcePost: { client_id: 'pkce-post', client_secret: 'post secret+/:=&%~', token_endpoint_auth_method: 'client_secret_post', requirePkce: true },
  pkceBasic: { client_id: 'pkce:basic', client_secret: 'b@sic s3cret+/:=&%~', token_endpoint_auth_method: 'client_secret_basic', requirePkce: true },
  noPkce: { client_id: 'no-pkce', client_secret: 'no-pkce-secret-0123456789', token_endpoint_auth_method: 'client_secret_post' },
  shortLived: {
    client_id: 'short-lived',
    client_secret: 'short-lived-secret-0123456789',
    token_endpoint_auth_method: 'client_secret_basic',
    requirePkce: true,
    accessTokenTtl: 2,
  },
  publicClient: { client_id: 'public-client', client_secret: '', token_endpoint_auth_method: 'none', requirePkce: true },
  revoked: { client_id: 'revoked', client_secret: 'revoked-secret-0123456789', token_endpoint_auth_method: 'client_secret_post', accessTokenTtl: 1 },
} satisfies Record<string, TestClient>;

let server: ServerProcess;
let idp: AuthorizationServer;
let api: Api;
let callbackUrl: string;

beforeAll(async () => {
  // PUBLIC_URL is left unset: the redirect_uri comes from where the server really listens.
  // The test authorization server listens on 127.0.0.1: an operator's allowance, as for an internal provider.
  server = await startServerProcess({ OAUTH_ALLOWED_HOSTS: '127.0.0.1' });
  api = apiClient(server.url, server.apiKey);
  callbackUrl = `http://localhost:${server.port}/v2/auth/callback`;
  idp = await startAuthorizationServer(Object.values(CLIENTS), callbackUrl);
});

afterAll(async () => {
  await server?.kill();
  await idp?.close();
});

async function createProvider(client: TestClient, overrides: Record<string, unknown> = {}, using: Api = api) {
  const response = await using.post('/v2/auth/providers', {
    provider_id: `${client.client_id.replace(':', '-')}-${crypto.randomUUID().slice(0, 8)}`,
    name: `Test IdP (${client.client_id})`,
    client_id: client.client_id,
    client_secret: client.client_secret,
    auth_url: idp.authUrl,
    token_url: idp.tokenUrl,
    uses_pkce: client.requirePkce === true,
    token_endpoint_auth_method: client.token_endpoint_auth_method,
    ...overrides,
  });
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response.body as { id: string; provider_id: string };
}

/** Delivers the provider's redirect to our callback as the browser would. */
async function deliver(url: URL) {
  const response = await fetch(url, { redirect: 'manual' });
  return { status: response.status, html: await response.text(), headers: response.headers };
}

/** authenticate → pending → the provider's pages → our callback → wait: the token. */
async function fullFlow(providerId: string, scopes: string[], owner: Record<string, string> = { user_id: 'alice' }, using: Api = api) {
  const started = await using.post('/v2/auth/authenticate', { provider: providerId, scopes, ...owner });
  expect(started.status, JSON.stringify(started.body)).toBe(200);
  expect(started.body.status).toBe('pending');
  const waiting = using.get(`/v2/auth/wait/${started.body.auth_id}?timeout=30`);
  const redirect = await new Browser().authorize(started.body.url, callbackUrl);
  const page = await deliver(redirect);
  expect(page.status, page.html).toBe(200);
  const waited = await waiting;
  expect(waited.status).toBe(200);
  expect(waited.body.status).toBe('completed');
  expect(typeof waited.body.token).toBe('string');
  return { started: started.body, redirect, page, token: waited.body.token as string };
}

describe('the authorization-code flow against a real authorization server', () => {
  it('with PKCE and client_secret_post: pending, the provider, our callback, wait completes with a token the provider accepts; then completed at once', async () => {
    const provider = await createProvider(CLIENTS.pkcePost);
    const { started, redirect, page, token } = await fullFlow(provider.provider_id, ['openid', 'repo:read']);

    const url = new URL(started.url);
    expect(url.origin + url.pathname).toBe(idp.authUrl);
    expect(url.searchParams.get('response_type')).toBe('code');
    expect(url.searchParams.get('client_id')).toBe('pkce-post');
    expect(url.searchParams.get('redirect_uri')).toBe(callbackUrl);
    expect(url.searchParams.get('scope')).toBe('openid repo:read');
    expect(url.searchParams.get('state')).toMatch(/^[\w-]{43}$/);
    expect(url.searchParams.get('code_challenge')).toMatch(/^[\w-]{43}$/);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(started.url).not.toContain('code_verifier');
    expect(redirect.searchParams.get('state')).toBe(url.searchParams.get('state'));
    expect(page.html).toContain('You can close this window');
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');

    const introspection = await idp.introspect(token, CLIENTS.pkcePost);
    expect(introspection.active).toBe(true);
    expect(introspection.client_id).toBe('pkce-post');
    expect(introspection.sub).toBe('alice');
    expect(introspection.scope?.split(' ')).toEqual(expect.arrayContaining(['openid', 'repo:read']));
    // The provider's own userinfo endpoint accepts it as a bearer token.
    const userinfo = await fetch(`${idp.issuer}/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(userinfo.status).toBe(200);
    expect(((await userinfo.json()) as { sub: string }).sub).toBe('alice');

    const again = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'alice' });
    expect(again.body).toEqual({
      status: 'completed',
      url: null,
      auth_id: null,
      token,
      user_id: 'alice',
      metadata: {
        token_id: expect.any(String),
        scopes: expect.arrayContaining(['repo:read']),
        expires_at: expect.any(String),
        token_type: 'Bearer',
        is_default: true,
        provider_account_label: null,
      },
    });

    // The same state a second time: the flow is used up.
    const replay = await deliver(redirect);
    expect(replay.status).toBe(400);
    expect(replay.html).toContain('already used');

    // Tokens are per owner: another user gets a new flow.
    const bob = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'bob' });
    expect(bob.body.status).toBe('pending');
  });

  it('a public client (token_endpoint_auth_method none): no secret stored or sent, PKCE carries the flow', async () => {
    const provider = await createProvider(CLIENTS.publicClient, { client_secret: null });
    const { token } = await fullFlow(provider.provider_id, ['openid', 'repo:read'], { user_id: 'pat' });
    // A public client cannot introspect; the provider's userinfo endpoint accepts the token instead.
    const userinfo = await fetch(`${idp.issuer}/me`, { headers: { authorization: `Bearer ${token}` } });
    expect(userinfo.status).toBe(200);
    // The scripted browser logs in at the provider as alice.
    expect(((await userinfo.json()) as { sub: string }).sub).toBe('alice');
    const db = openRawSql(server.databaseUrl, { readonly: true });
    const row = (await db.prepare('SELECT client_secret_sealed FROM oauth_providers WHERE id = ?').get(provider.id)) as { client_secret_sealed: string | null };
    await db.close();
    expect(row.client_secret_sealed).toBeNull();
  });

  it('with PKCE and client_secret_basic (form-encoded id and secret in HTTP Basic)', async () => {
    const provider = await createProvider(CLIENTS.pkceBasic);
    const { token } = await fullFlow(provider.provider_id, ['repo:read'], { agent_id: 'agent-7' });
    expect((await idp.introspect(token, CLIENTS.pkceBasic)).active).toBe(true);
    const again = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], agent_id: 'agent-7' });
    expect(again.body.token).toBe(token);
  });

  it('a provider that requires PKCE refuses a request without it (PKCE is what makes the flow pass above)', async () => {
    const provider = await createProvider(CLIENTS.pkcePost, { uses_pkce: false });
    const started = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'] });
    expect(new URL(started.body.url).searchParams.has('code_challenge')).toBe(false);
    const redirect = await new Browser().authorize(started.body.url, callbackUrl);
    expect(redirect.searchParams.get('error')).toBe('invalid_request');
    const page = await deliver(redirect);
    expect(page.status).toBe(400);
    const waited = await api.get(`/v2/auth/wait/${started.body.auth_id}?timeout=5`);
    expect(waited.body).toMatchObject({ status: 'failed', token: null, error: 'invalid_request' });
  });

  it('without PKCE', async () => {
    const provider = await createProvider(CLIENTS.noPkce);
    const { started, token } = await fullFlow(provider.provider_id, ['repo:read', 'repo:write']);
    const url = new URL(started.url);
    expect(url.searchParams.has('code_challenge')).toBe(false);
    expect(url.searchParams.has('code_challenge_method')).toBe(false);
    const introspection = await idp.introspect(token, CLIENTS.noPkce);
    expect(introspection.active).toBe(true);
    expect(introspection.scope?.split(' ').sort()).toEqual(['repo:read', 'repo:write']);
  });

  it('a token that expires is refreshed with its refresh token before authenticate answers', async () => {
    const provider = await createProvider(CLIENTS.shortLived);
    const { token: first } = await fullFlow(provider.provider_id, ['repo:read']);
    expect((await idp.introspect(first, CLIENTS.shortLived)).active).toBe(true);
    // Let the provider itself declare the first token dead.
    await eventually(async () => ((await idp.introspect(first, CLIENTS.shortLived)).active ? undefined : true), 10_000, 200);

    // Three agents ask at once: one refresh at the provider, one new token for all of them.
    const answers = await Promise.all(
      [1, 2, 3].map(() => api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'alice' })),
    );
    const again = answers[0]!;
    expect(
      again.body.status,
      server
        .output()
        .split('\n')
        .filter((l) => l.includes('oauth'))
        .join('\n'),
    ).toBe('completed');
    expect(again.body.token).not.toBe(first);
    expect(answers.map((a) => a.body.token)).toEqual([again.body.token, again.body.token, again.body.token]);
    expect((await idp.introspect(again.body.token, CLIENTS.shortLived)).active).toBe(true);
    expect(server.output().match(new RegExp(`oauth token refreshed[^\\n]*${provider.provider_id}`, 'g'))).toHaveLength(1);
  });

  it('a refresh token the provider rejects (the grant was revoked there) starts a new pending flow', async () => {
    const provider = await createProvider(CLIENTS.revoked);
    const { token } = await fullFlow(provider.provider_id, ['repo:read']);
    expect(await idp.revoke(token, CLIENTS.revoked)).toBe(200);
    expect((await idp.introspect(token, CLIENTS.revoked)).active).toBe(false);

    // Until its expiry (1 s) the stored token is handed out as it is; then the refresh is refused.
    const again = await eventually(
      async () => {
        const answer = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'alice' });
        return answer.body.status === 'completed' ? undefined : answer;
      },
      10_000,
      100,
    );
    expect(again.body.status).toBe('pending');
    expect(again.body.token).toBeNull();
    expect(again.body.url).toContain(idp.authUrl);
    expect(server.output()).toMatch(/oauth token refresh failed.*"error":"invalid_grant"/);

    // The new flow works and replaces the dead token.
    const redirect = await new Browser().authorize(again.body.url, callbackUrl);
    expect((await deliver(redirect)).status).toBe(200);
    const waited = await api.get(`/v2/auth/wait/${again.body.auth_id}?timeout=5`);
    expect(waited.body.status).toBe('completed');
    expect((await idp.introspect(waited.body.token, CLIENTS.revoked)).active).toBe(true);
  });
});

describe('rejections', () => {
  it('a wrong state, or none, gets the 400 page and changes nothing', async () => {
    const provider = await createProvider(CLIENTS.pkcePost);
    const started = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'] });
    const redirect = await new Browser().authorize(started.body.url, callbackUrl);

    const forged = new URL(redirect);
    forged.searchParams.set('state', 'x'.repeat(43));
    const wrong = await deliver(forged);
    expect(wrong.status).toBe(400);
    expect(wrong.html).toContain('unknown');
    const noState = new URL(redirect);
    noState.searchParams.delete('state');
    expect((await deliver(noState)).status).toBe(400);
    expect((await api.get(`/v2/auth/wait/${started.body.auth_id}?timeout=0`)).body.status).toBe('pending');

    // The real state still works afterwards.
    expect((await deliver(redirect)).status).toBe(200);
    expect((await api.get(`/v2/auth/wait/${started.body.auth_id}?timeout=0`)).body.status).toBe('completed');
  });

  it('a denied consent ends the flow as failed, and wait says so', async () => {
    const provider = await createProvider(CLIENTS.pkcePost);
    const started = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:write'], user_id: 'carol' });
    const waiting = api.get(`/v2/auth/wait/${started.body.auth_id}?timeout=30`);
    const browser = new Browser();
    const redirect = await browser.authorize(started.body.url, callbackUrl, { login: 'carol', deny: true });
    expect(browser.pagesSeen).toEqual(['login', 'consent']);
    expect(redirect.searchParams.get('error')).toBe('access_denied');
    const page = await deliver(redirect);
    expect(page.status).toBe(400);
    expect(page.html).toContain('access_denied');
    const waited = await waiting;
    expect(waited.body).toMatchObject({ status: 'failed', token: null, error: 'access_denied' });
    const again = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:write'], user_id: 'carol' });
    expect(again.body.status).toBe('pending');
  });

  it('scopes the stored token does not cover start a new flow', async () => {
    const provider = await createProvider(CLIENTS.noPkce);
    await fullFlow(provider.provider_id, ['repo:read'], { user_id: 'dave' });
    const wider = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read', 'repo:write'], user_id: 'dave' });
    expect(wider.body.status).toBe('pending');
    expect(new URL(wider.body.url).searchParams.get('scope')).toBe('repo:read repo:write');
    const narrower = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'dave' });
    expect(narrower.body.status).toBe('completed');
  });

  it("another organization's provider, flow and token are invisible (404 / not_found)", async () => {
    const provider = await createProvider(CLIENTS.noPkce);
    const { started } = await fullFlow(provider.provider_id, ['repo:read'], { user_id: 'erin' });

    // There is no API for organizations: add one and its key to the server's database file directly.
    const otherKey = `other-org-key-${crypto.randomUUID()}`;
    const db = openRawSql(server.databaseUrl);
    const now = new Date().toISOString();
    const orgId = crypto.randomUUID();
    const workspaceId = crypto.randomUUID();
    await db.prepare('INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)').run(orgId, 'other', now);
    await db
      .prepare('INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, ?, 1, ?)')
      .run(workspaceId, orgId, 'default', now);
    await db
      .prepare('INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at) VALUES (?, ?, NULL, ?, ?, ?)')
      .run(crypto.randomUUID(), orgId, hashApiKey(otherKey), 'other org', now);
    await db.close();
    const other = apiClient(server.url, otherKey);

    expect((await other.get(`/v2/auth/providers/${provider.id}`)).status).toBe(404);
    expect((await other.patch(`/v2/auth/providers/${provider.id}`, { name: 'mine now' })).status).toBe(404);
    expect((await other.delete(`/v2/auth/providers/${provider.id}`)).status).toBe(404);
    expect((await other.get('/v2/auth/providers')).body).toEqual([]);
    expect((await other.get('/v2/auth/tokens')).body).toEqual([]);
    const authenticate = await other.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'erin' });
    expect(authenticate.status).toBe(404);
    expect((await other.get(`/v2/auth/wait/${started.auth_id}?timeout=0`)).body).toMatchObject({ status: 'not_found', token: null });
    // provider_id is unique per organization only.
    await createProvider(CLIENTS.noPkce, { provider_id: provider.provider_id }, other);
    expect((await api.get(`/v2/auth/providers/${provider.id}`)).status).toBe(200);
  });
});

describe('tokens belong to the workspace whose flow obtained them', () => {
  it('a workspace-scoped key of another workspace can neither obtain, see, change nor replace a token for the same user_id', async () => {
    const provider = await createProvider(CLIENTS.noPkce);
    // Workspace A (the organization's default, through the organization key) obtains a token for "victim".
    const { token: tokenA, started: startedA } = await fullFlow(provider.provider_id, ['repo:read'], { user_id: 'victim' });
    const [storedA] = (await api.get(`/v2/auth/tokens?provider_id=${provider.provider_id}`)).body as Array<{ id: string; user_id: string }>;
    expect(storedA).toMatchObject({ user_id: 'victim', provider_id: provider.provider_id });

    // Workspace B of the same organization, and a key scoped to it.
    const workspace = await api.post('/v1/workspaces', { name: `ws-b-${crypto.randomUUID().slice(0, 8)}` });
    expect(workspace.status).toBe(201);
    const keyB = await api.post('/v1/api-keys', { workspace_id: workspace.body.id, description: 'workspace B' });
    const b = apiClient(server.url, keyB.body.key);

    // B sees the organization's provider, but not A's token: asking for "victim" starts B's own flow.
    const asked = await b.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'victim' });
    expect(asked.status).toBe(200);
    expect(asked.body.status).toBe('pending');
    expect(asked.body.token).toBeNull();
    expect(
      (await b.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'victim', token_id: storedA!.id })).status,
    ).toBe(404);
    expect((await b.get('/v2/auth/tokens')).body).toEqual([]);
    expect((await b.get(`/v2/auth/tokens/exists?provider_id=${provider.provider_id}`)).body).toEqual({ exists: false, has_token: false });
    expect((await b.get(`/v2/auth/wait/${startedA.auth_id}?timeout=0`)).body.status).toBe('not_found');
    expect((await b.patch(`/v2/auth/tokens/${storedA!.id}/metadata`, { provider_account_label: 'mine' })).status).toBe(404);
    expect((await b.delete(`/v2/auth/tokens/${storedA!.id}`)).status).toBe(404);
    expect((await b.delete(`/v2/auth/tokens?provider_id=${provider.provider_id}`)).body).toMatchObject({ deleted: 0 });

    // B completes a flow for the same user_id: it gets its own token, and A's stays A's.
    const { token: tokenB } = await fullFlow(provider.provider_id, ['repo:read'], { user_id: 'victim' }, b);
    expect(tokenB).not.toBe(tokenA);
    const againA = await api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'victim' });
    expect(againA.body).toMatchObject({ status: 'completed', token: tokenA });
    const againB = await b.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['repo:read'], user_id: 'victim' });
    expect(againB.body).toMatchObject({ status: 'completed', token: tokenB });
    expect((await api.get(`/v2/auth/tokens/exists?provider_id=${provider.provider_id}&user_id=victim`)).body.exists).toBe(true);
  });
});

describe('at rest', () => {
  it('the database file holds no client secret, access token or refresh token in clear text', async () => {
    // Earlier tests ran flows with every client; make sure refresh tokens were among what was issued.
    expect(idp.issuedTokens.size).toBeGreaterThan(10);
    const db = openRawSql(server.databaseUrl, { readonly: true });
    const bytes = await db.storedBytes();
    await db.close();
    // The flows really wrote something there (the test could not pass on an empty file).
    expect(bytes.includes(Buffer.from('pkce-post'))).toBe(true);
    const confidential = Object.values(CLIENTS).filter((client) => client.client_secret !== '');
    for (const client of confidential) {
      expect(bytes.includes(Buffer.from(client.client_secret)), client.client_id).toBe(false);
    }
    for (const token of idp.issuedTokens) expect(bytes.includes(Buffer.from(token)), 'a token in clear text').toBe(false);
    // Nor in the log.
    const log = server.output();
    for (const client of confidential) expect(log).not.toContain(client.client_secret);
    for (const token of idp.issuedTokens) expect(log).not.toContain(token);
  });
});
