import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inProcessApp } from '../helpers/in-process.ts';

let ctx: Awaited<ReturnType<typeof inProcessApp>>;
beforeAll(async () => {
  // The loopback hosts these tests name are allowed as an operator would allow an internal provider;
  // test/oauth/ssrf.test.ts covers the refusal without this setting.
  ctx = await inProcessApp({ env: { OAUTH_ALLOWED_HOSTS: 'localhost,127.0.0.1,127.8.9.10,[::1]' } });
});
afterAll(() => ctx.close());

let n = 0;
function providerBody(overrides: Record<string, unknown> = {}) {
  n += 1;
  return {
    provider_id: `idp-${n}`,
    name: 'Example IdP',
    client_id: 'client-123',
    client_secret: `very-secret-${crypto.randomUUID()}`,
    auth_url: 'https://idp.example.com/oauth/authorize',
    token_url: 'https://idp.example.com/oauth/token',
    ...overrides,
  };
}

async function callback(query: string) {
  const response = await ctx.app.request(`/v2/auth/callback?${query}`);
  return { status: response.status, html: await response.text(), type: response.headers.get('content-type') };
}

describe('providers', () => {
  it('create answers 200 with the hosted provider shape and defaults, and never the client secret', async () => {
    const body = providerBody();
    const created = await ctx.api.post('/v2/auth/providers', body);
    expect(created.status).toBe(200);
    expect(created.body).toEqual({
      id: expect.any(String),
      organization_id: expect.any(String),
      provider_id: body.provider_id,
      name: 'Example IdP',
      client_id: 'client-123',
      auth_url: body.auth_url,
      token_url: body.token_url,
      uses_pkce: false,
      code_challenge_method: 'S256',
      token_endpoint_auth_method: 'client_secret_post',
      created_at: expect.any(String),
      updated_at: expect.any(String),
      provider_type: null,
      mcp_server_url: null,
      is_dynamic_client: false,
    });
    const fetched = await ctx.api.get(`/v2/auth/providers/${created.body.id}`);
    expect(fetched.body).toEqual(created.body);
    // By its slug, as the hosted API's clients name it, too.
    expect((await ctx.api.get(`/v2/auth/providers/${body.provider_id}`)).body).toEqual(created.body);
    const listed = await ctx.api.get('/v2/auth/providers');
    expect(Array.isArray(listed.body)).toBe(true);
    expect(listed.body.map((p: { id: string }) => p.id)).toContain(created.body.id);
    expect(JSON.stringify([created.body, fetched.body, listed.body])).not.toContain(body.client_secret);
    const row = (await ctx.sql.prepare('SELECT client_secret_sealed FROM oauth_providers WHERE id = ?').get(created.body.id)) as {
      client_secret_sealed: string;
    };
    expect(row.client_secret_sealed).toMatch(/^v1:/);
    expect(row.client_secret_sealed).not.toContain(body.client_secret);
  });

  it('provider_id is unique in the organization (409)', async () => {
    const body = providerBody();
    expect((await ctx.api.post('/v2/auth/providers', body)).status).toBe(200);
    const again = await ctx.api.post('/v2/auth/providers', { ...body, name: 'other' });
    expect(again.status).toBe(409);
    expect(again.body.detail).toContain(body.provider_id);
  });

  it('auth_url and token_url must be https, or http on a loopback host only (422 on the field)', async () => {
    for (const [field, url] of [
      ['token_url', 'http://idp.example.com/token'],
      ['auth_url', 'http://idp.example.com/authorize'],
      ['token_url', 'http://localhost.example.com/token'],
      ['token_url', 'http://10.0.0.1/token'],
      ['token_url', 'ftp://idp.example.com/token'],
      ['token_url', 'https://user:pass@idp.example.com/token'],
      ['auth_url', 'https://idp.example.com/authorize#frag'],
    ] as const) {
      const response = await ctx.api.post('/v2/auth/providers', providerBody({ [field]: url }));
      expect(response.status, url).toBe(422);
      expect(response.body.detail).toEqual([{ loc: ['body', field], msg: expect.any(String), type: 'value_error' }]);
    }
    const notUrl = await ctx.api.post('/v2/auth/providers', providerBody({ token_url: 'not a url' }));
    expect(notUrl.body.detail).toEqual([{ loc: ['body', 'token_url'], msg: expect.any(String), type: 'url_parsing' }]);
    for (const url of ['http://localhost:9000/token', 'http://127.0.0.1/token', 'http://127.8.9.10:1/token', 'http://[::1]:8080/token']) {
      expect((await ctx.api.post('/v2/auth/providers', providerBody({ token_url: url, auth_url: url }))).status, url).toBe(200);
    }
  });

  it('other bad input is 422 in the FastAPI shape', async () => {
    const { client_secret: _omitted, ...noSecret } = providerBody();
    expect((await ctx.api.post('/v2/auth/providers', noSecret)).body.detail).toEqual([
      { loc: ['body', 'client_secret'], msg: 'client_secret is required with token_endpoint_auth_method client_secret_post', type: 'value_error' },
    ]);
    // A public client has no secret and must use PKCE.
    expect((await ctx.api.post('/v2/auth/providers', { ...noSecret, token_endpoint_auth_method: 'none' })).body.detail[0]).toMatchObject({
      loc: ['body', 'uses_pkce'],
      type: 'value_error',
    });
    expect((await ctx.api.post('/v2/auth/providers', providerBody({ token_endpoint_auth_method: 'none', uses_pkce: true }))).body.detail[0]).toMatchObject({
      loc: ['body', 'client_secret'],
      type: 'value_error',
    });
    const publicClient = await ctx.api.post('/v2/auth/providers', {
      ...providerBody(),
      client_secret: null,
      token_endpoint_auth_method: 'none',
      uses_pkce: true,
      provider_type: 'slack',
    });
    expect(publicClient.status).toBe(200);
    expect(publicClient.body).toMatchObject({ token_endpoint_auth_method: 'none', uses_pkce: true, provider_type: 'slack' });
    // A public client stays secret-less and PKCE-bound; made confidential, it needs its secret.
    const ref = `/v2/auth/providers/${publicClient.body.provider_id}`;
    expect((await ctx.api.patch(ref, { client_secret: 'a-secret-for-a-public-client' })).status).toBe(400);
    expect((await ctx.api.patch(ref, { uses_pkce: false })).status).toBe(400);
    expect((await ctx.api.patch(ref, { token_endpoint_auth_method: 'client_secret_basic' })).status).toBe(400);
    const confidential = await ctx.api.patch(ref, { token_endpoint_auth_method: 'client_secret_basic', client_secret: 'now-a-secret-0123456789' });
    expect(confidential.body).toMatchObject({ token_endpoint_auth_method: 'client_secret_basic' });
    const row = (await ctx.sql.prepare('SELECT client_secret_sealed FROM oauth_providers WHERE id = ?').get(publicClient.body.id)) as {
      client_secret_sealed: string;
    };
    expect(row.client_secret_sealed).toMatch(/^v1:/);
    expect((await ctx.api.post('/v2/auth/providers', providerBody({ code_challenge_method: 'S512' }))).body.detail[0]).toMatchObject({
      loc: ['body', 'code_challenge_method'],
      type: 'enum',
    });
    expect((await ctx.api.post('/v2/auth/providers', providerBody({ token_endpoint_auth_method: 'private_key_jwt' }))).body.detail[0]).toMatchObject({
      loc: ['body', 'token_endpoint_auth_method'],
      type: 'enum',
    });
    expect((await ctx.api.post('/v2/auth/providers', providerBody({ provider_type: 'github' }))).body.detail[0]).toMatchObject({
      loc: ['body', 'provider_type'],
      type: 'enum',
    });
    expect((await ctx.api.post('/v2/auth/providers', providerBody({ provider_id: 'has space' }))).body.detail[0]).toMatchObject({
      loc: ['body', 'provider_id'],
      type: 'string_pattern_mismatch',
    });
    expect((await ctx.api.post('/v2/auth/providers', providerBody({ uses_pkce: 'yes' }))).body.detail[0]).toMatchObject({
      loc: ['body', 'uses_pkce'],
      type: 'bool_type',
    });
    expect((await ctx.api.get('/v2/auth/providers/no-such-provider')).status).toBe(404);
  });

  it('patch changes fields and the secret (sealed again), refuses a new provider_id (400); delete removes it', async () => {
    const body = providerBody();
    const created = (await ctx.api.post('/v2/auth/providers', body)).body;
    const before = (await ctx.sql.prepare('SELECT client_secret_sealed FROM oauth_providers WHERE id = ?').get(created.id)) as { client_secret_sealed: string };
    const patched = await ctx.api.patch(`/v2/auth/providers/${created.id}`, {
      name: 'Renamed',
      client_secret: 'the-new-secret-value',
      uses_pkce: true,
      token_endpoint_auth_method: 'client_secret_basic',
      provider_id: body.provider_id,
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ name: 'Renamed', uses_pkce: true, token_endpoint_auth_method: 'client_secret_basic', client_id: 'client-123' });
    expect(patched.body).not.toHaveProperty('client_secret');
    const after = (await ctx.sql.prepare('SELECT client_secret_sealed FROM oauth_providers WHERE id = ?').get(created.id)) as { client_secret_sealed: string };
    expect(after.client_secret_sealed).not.toBe(before.client_secret_sealed);
    expect(after.client_secret_sealed).not.toContain('the-new-secret-value');

    expect((await ctx.api.patch(`/v2/auth/providers/${created.id}`, { provider_id: 'another-id' })).status).toBe(400);
    expect((await ctx.api.patch(`/v2/auth/providers/${created.id}`, { token_url: 'http://idp.example.com/token' })).body.detail[0].loc).toEqual([
      'body',
      'token_url',
    ]);
    const deleted = await ctx.api.delete(`/v2/auth/providers/${body.provider_id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ message: `OAuth provider '${body.provider_id}' deleted.` });
    expect((await ctx.api.get(`/v2/auth/providers/${created.id}`)).status).toBe(404);
    expect((await ctx.api.patch(`/v2/auth/providers/${created.id}`, { name: 'x' })).status).toBe(404);
  });

  it('the stored client secret is never sent to a new token_url, auth_url or client_id unless it is given again', async () => {
    const created = (await ctx.api.post('/v2/auth/providers', providerBody())).body;
    for (const change of [{ token_url: 'https://attacker.example/token' }, { auth_url: 'https://attacker.example/authorize' }, { client_id: 'other-client' }]) {
      const refused = await ctx.api.patch(`/v2/auth/providers/${created.id}`, change);
      expect(refused.status, JSON.stringify(change)).toBe(400);
      expect(refused.body.detail).toMatch(/client_secret/);
    }
    expect((await ctx.api.get(`/v2/auth/providers/${created.id}`)).body.token_url).toBe('https://idp.example.com/oauth/token');
    const allowed = await ctx.api.patch(`/v2/auth/providers/${created.id}`, { token_url: 'https://idp2.example.com/token', client_secret: 'new-secret' });
    expect(allowed.status).toBe(200);
    expect(allowed.body.token_url).toBe('https://idp2.example.com/token');
  });

  it('a workspace-scoped key may read providers but not create, change or delete them (403)', async () => {
    const created = (await ctx.api.post('/v2/auth/providers', providerBody())).body;
    const key = await ctx.api.post('/v1/api-keys', { workspace_id: ctx.workspaceId, description: 'workspace key' });
    const workspaceKey = ctx.client(key.body.key);
    expect((await workspaceKey.get(`/v2/auth/providers/${created.id}`)).status).toBe(200);
    expect((await workspaceKey.post('/v2/auth/providers', providerBody())).status).toBe(403);
    expect((await workspaceKey.patch(`/v2/auth/providers/${created.id}`, { token_url: 'https://evil.example/t', client_secret: 'x' })).status).toBe(403);
    expect((await workspaceKey.delete(`/v2/auth/providers/${created.id}`)).status).toBe(403);
    expect((await ctx.api.get(`/v2/auth/providers/${created.id}`)).body.token_url).toBe('https://idp.example.com/oauth/token');
  });
});

describe('unknown fields (contract §2)', () => {
  it('are ignored and each named in a Warning header; nothing of them is stored', async () => {
    const body = providerBody({ tracked_packages: ['x'], nested_extra: { a: 1 } });
    const created = await ctx.api.post('/v2/auth/providers', body);
    expect(created.status).toBe(200);
    const warnings = created.headers.get('warning') ?? '';
    expect(warnings).toContain('299 - "Unknown field ignored: body.tracked_packages"');
    expect(warnings).toContain('299 - "Unknown field ignored: body.nested_extra"');
    expect(created.body).not.toHaveProperty('tracked_packages');
    const row = await ctx.sql.prepare('SELECT * FROM oauth_providers WHERE id = ?').get(created.body.id);
    expect(JSON.stringify(row)).not.toContain('tracked_packages');

    const started = await ctx.api.post('/v2/auth/authenticate', { provider: body.provider_id, scopes: ['read'], user_id: 'w', platform_extra: true });
    expect(started.status).toBe(200);
    expect(started.headers.get('warning')).toBe('299 - "Unknown field ignored: body.platform_extra"');
    // A body without unknown fields has no Warning.
    expect((await ctx.api.get('/v2/auth/providers')).headers.get('warning')).toBeNull();
    // A known field with a wrong type is still 422, unknown fields or not.
    const wrong = await ctx.api.patch(`/v2/auth/providers/${body.provider_id}`, { uses_pkce: 'yes', extra: 1 });
    expect(wrong.status).toBe(422);
    expect(wrong.body.detail).toEqual([{ loc: ['body', 'uses_pkce'], msg: expect.any(String), type: 'bool_type' }]);
  });
});

describe('authenticate', () => {
  it('starts a flow: the provider auth_url (its own parameters kept) with state, redirect_uri and PKCE', async () => {
    const provider = (
      await ctx.api.post(
        '/v2/auth/providers',
        providerBody({ auth_url: 'https://idp.example.com/authorize?audience=api', uses_pkce: true, code_challenge_method: 'plain' }),
      )
    ).body;
    const response = await ctx.api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['read', 'write', 'read'], user_id: 'u1' });
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: 'pending', url: expect.any(String), auth_id: expect.any(String), token: null, user_id: 'u1', metadata: null });
    const url = new URL(response.body.url);
    expect(url.origin + url.pathname).toBe('https://idp.example.com/authorize');
    expect(url.searchParams.get('audience')).toBe('api');
    expect(url.searchParams.get('redirect_uri')).toBe('http://localhost/v2/auth/callback');
    expect(url.searchParams.get('scope')).toBe('read write');
    expect(url.searchParams.get('code_challenge_method')).toBe('plain');
    expect(url.searchParams.get('code_challenge')).toMatch(/^[\w-]{43}$/);
    // Two flows never share a state.
    const second = await ctx.api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['read'], user_id: 'u1' });
    expect(new URL(second.body.url).searchParams.get('state')).not.toBe(url.searchParams.get('state'));
    // The verifier and the state are not stored in clear text.
    const row = (await ctx.sql.prepare('SELECT * FROM oauth_flows WHERE id = ?').get(response.body.auth_id)) as Record<string, string>;
    expect(JSON.stringify(row)).not.toContain(url.searchParams.get('state'));
    expect(JSON.stringify(row)).not.toContain(url.searchParams.get('code_challenge'));
  });

  it('validates its body and names unknown providers (404)', async () => {
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: 'nope', scopes: [] })).status).toBe(404);
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: 'x' })).body.detail).toEqual([
      { loc: ['body', 'scopes'], msg: 'Field required', type: 'missing' },
    ]);
    expect((await ctx.api.post('/v2/auth/authenticate', { scopes: ['a'] })).body.detail[0].loc).toEqual(['body', 'provider']);
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: 'x', scopes: ['has space'] })).body.detail[0].loc).toEqual(['body', 'scopes', 0]);
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: 'x', scopes: ['a'], use_agent_builder_public_oauth: true })).body.detail[0].loc).toEqual([
      'body',
      'use_agent_builder_public_oauth',
    ]);
    // An unknown field is ignored (the provider is still unknown: 404), a known one of the wrong type is 422.
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: 'x', scopes: ['a'], bogus: 1 })).status).toBe(404);
    expect((await ctx.api.post('/v2/auth/authenticate', { provider: 'x', scopes: ['a'], force_new: 'yes', bogus: 1 })).body.detail).toEqual([
      { loc: ['body', 'force_new'], msg: expect.any(String), type: 'bool_type' },
    ]);
    expect((await ctx.app.request('/v2/auth/authenticate', { method: 'POST', body: '{}' })).status).toBe(401);
  });
});

describe('callback and wait', () => {
  async function startFlow(overrides: Record<string, unknown> = {}) {
    const provider = (await ctx.api.post('/v2/auth/providers', providerBody(overrides))).body;
    const started = (await ctx.api.post('/v2/auth/authenticate', { provider: provider.provider_id, scopes: ['read'] })).body;
    return { authId: started.auth_id as string, state: new URL(started.url).searchParams.get('state')! };
  }

  it('needs no API key, and answers an unknown state with the 400 page', async () => {
    const page = await callback('state=unknown&code=abc');
    expect(page.status).toBe(400);
    expect(page.type).toMatch(/text\/html/);
    expect(page.html).toContain('unknown');
    expect((await callback('code=abc')).status).toBe(400);
  });

  it('a state older than 10 minutes is refused, and the flow fails as expired', async () => {
    const { authId, state } = await startFlow();
    await ctx.sql.prepare('UPDATE oauth_flows SET expires_at = ? WHERE id = ?').run(new Date(Date.now() - 1000).toISOString(), authId);
    const page = await callback(`state=${state}&code=abc`);
    expect(page.status).toBe(400);
    expect(page.html).toContain('expired');
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body).toMatchObject({ status: 'failed', error: 'expired' });
  });

  it('an unreachable token endpoint fails the flow (502 page), and the state cannot be reused', async () => {
    const { authId, state } = await startFlow({ token_url: 'http://127.0.0.1:1/token' });
    const page = await callback(`state=${state}&code=abc`);
    expect(page.status).toBe(502);
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body).toMatchObject({ status: 'failed', token: null, error: 'token_exchange_failed' });
    expect((await callback(`state=${state}&code=abc`)).status).toBe(400);
  });

  it('wait: pending at timeout=0, timeout after the time passes, not_found for unknown ids, 422 for bad input', async () => {
    const { authId } = await startFlow();
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body).toEqual({ status: 'pending', token: null, error: null, error_description: null });
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=1`)).body.status).toBe('timeout');
    expect((await ctx.api.get(`/v2/auth/wait/${crypto.randomUUID()}?timeout=0`)).body.status).toBe('not_found');
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=61`)).body.detail[0].loc).toEqual(['query', 'timeout']);
    expect((await ctx.api.get('/v2/auth/wait/nope')).body.detail[0].loc).toEqual(['path', 'auth_id']);
  });

  it('flows older than a day are forgotten when new flows start', async () => {
    const { authId } = await startFlow();
    await ctx.sql.prepare('UPDATE oauth_flows SET created_at = ? WHERE id = ?').run(new Date(Date.now() - 25 * 3600_000).toISOString(), authId);
    const { authId: fresh } = await startFlow();
    expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body.status).toBe('not_found');
    expect((await ctx.api.get(`/v2/auth/wait/${fresh}?timeout=0`)).body.status).toBe('pending');
  });

  it('a provider error ends a waiting flow at once', async () => {
    const { authId, state } = await startFlow();
    const waiting = ctx.api.get(`/v2/auth/wait/${authId}?timeout=30`);
    const page = await callback(`state=${state}&error=access_denied&error_description=${encodeURIComponent('The user said no <b>')}`);
    expect(page.status).toBe(400);
    expect(page.html).toContain('The user said no &#60;b&#62;');
    expect((await waiting).body).toEqual({ status: 'failed', token: null, error: 'access_denied', error_description: 'The user said no <b>' });
  });

  it('the OpenAPI document lists the OAuth routes; the callback takes no key', async () => {
    const doc = (await (await ctx.app.request('/openapi.json')).json()) as { paths: Record<string, Record<string, { security?: unknown[] }>> };
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/v2/auth/providers',
        '/v2/auth/providers/{provider_id}',
        '/v2/auth/callback/{provider_id}',
        '/v2/auth/tokens',
        '/v2/auth/tokens/exists',
        '/v2/auth/authenticate',
        '/v2/auth/callback',
        '/v2/auth/wait/{auth_id}',
      ]),
    );
    expect(doc.paths['/v2/auth/callback']!.get!.security).toEqual([]);
  });
});
