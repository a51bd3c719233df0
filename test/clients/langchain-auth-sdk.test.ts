import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { type AuthorizationServer, startAuthorizationServer, type TestClient } from '../oauth/authorization-server.ts';
import { Browser } from '../oauth/browser.ts';

/**
 * Replays the langchain-auth SDK `Client`'s call sequence (../shared/reference/real-clients.md)
 * against a real control-plane process on loopback and a real authorization server
 * (`oidc-provider`) on loopback. The SDK itself is Python and not installable here, so this
 * class stands in for it: the same prefix (`/v2/auth`), the same header (`x-api-key`), the same
 * bodies, and the same checks — any status but 200 raises, and it reads exactly the keys the SDK
 * reads (a missing key raises too).
 */
class LangchainAuthClient {
  readonly #base: string;
  readonly #apiKey: string;
  /** Every call made, with its status, for the final "every call answered 200" check. */
  readonly calls: Array<{ method: string; path: string; status: number }> = [];

  constructor(apiUrl: string, apiKey: string) {
    this.#base = `${apiUrl}/v2/auth`;
    this.#apiKey = apiKey;
  }

  async #request(method: string, path: string, body?: unknown): Promise<unknown> {
    const response = await fetch(this.#base + path, {
      method,
      headers: { 'x-api-key': this.#apiKey, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    this.calls.push({ method, path, status: response.status });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`${method} ${path}: HTTP ${response.status} ${text}`);
    return JSON.parse(text) as unknown;
  }

  async createOAuthProvider(fields: Record<string, unknown>): Promise<Provider> {
    return readProvider(await this.#request('POST', '/providers', fields));
  }

  async listOAuthProviders(): Promise<Provider[]> {
    const data = await this.#request('GET', '/providers');
    // The SDK iterates the answer itself as the list.
    if (!Array.isArray(data)) throw new TypeError('list_oauth_providers: the answer is not a JSON array');
    return data.map(readProvider);
  }

  async getOAuthProvider(providerId: string): Promise<Provider> {
    return readProvider(await this.#request('GET', `/providers/${encodeURIComponent(providerId)}`));
  }

  async updateOAuthProvider(providerId: string, fields: Record<string, unknown>): Promise<Provider> {
    return readProvider(await this.#request('PATCH', `/providers/${encodeURIComponent(providerId)}`, fields));
  }

  async deleteOAuthProvider(providerId: string): Promise<string> {
    const data = (await this.#request('DELETE', `/providers/${encodeURIComponent(providerId)}`)) as Record<string, unknown>;
    return need(data, 'message', 'string');
  }

  async authenticate(body: { provider: string; scopes: string[]; user_id?: string; ls_user_id?: string; agent_id?: string }) {
    const data = (await this.#request('POST', '/authenticate', body)) as Record<string, unknown>;
    const status = need(data, 'status', 'string');
    return { status, url: data.url as string | null, auth_id: data.auth_id as string | null, token: data.token as string | null };
  }

  async waitForCompletion(authId: string, timeout: number) {
    const data = (await this.#request('GET', `/wait/${encodeURIComponent(authId)}?timeout=${timeout}`)) as Record<string, unknown>;
    return { status: need(data, 'status', 'string'), token: data.token as string | null };
  }

  async tokenExists(providerId: string): Promise<boolean> {
    const data = (await this.#request('GET', `/tokens/exists?provider_id=${encodeURIComponent(providerId)}`)) as Record<string, unknown>;
    return need(data, 'exists', 'boolean');
  }

  async revokeTokens(providerId: string): Promise<void> {
    await this.#request('DELETE', `/tokens?provider_id=${encodeURIComponent(providerId)}`);
  }
}

type Provider = {
  id: string;
  organization_id: string;
  provider_id: string;
  name: string;
  client_id: string;
  auth_url: string;
  token_url: string;
  uses_pkce: boolean;
  created_at: string;
  updated_at: string;
};

/** The SDK builds its provider object from exactly these keys. */
function readProvider(data: unknown): Provider {
  const d = data as Record<string, unknown>;
  return {
    id: need(d, 'id', 'string'),
    organization_id: need(d, 'organization_id', 'string'),
    provider_id: need(d, 'provider_id', 'string'),
    name: need(d, 'name', 'string'),
    client_id: need(d, 'client_id', 'string'),
    auth_url: need(d, 'auth_url', 'string'),
    token_url: need(d, 'token_url', 'string'),
    uses_pkce: need(d, 'uses_pkce', 'boolean'),
    created_at: need(d, 'created_at', 'string'),
    updated_at: need(d, 'updated_at', 'string'),
  };
}

function need<T extends 'string' | 'boolean'>(data: Record<string, unknown>, key: string, type: T): T extends 'string' ? string : boolean {
  if (data === null || typeof data !== 'object' || typeof data[key] !== type)
    throw new TypeError(`the answer has no ${type} '${key}': ${JSON.stringify(data)}`);
  return data[key] as T extends 'string' ? string : boolean;
}

const CLIENT: TestClient = { client_id: 'sdk-app', client_secret: 'sdk secret+/:=&%~', token_endpoint_auth_method: 'client_secret_post', requirePkce: true };

let server: ServerProcess;
let idp: AuthorizationServer;
let callbackUrl: string;

beforeAll(async () => {
  // The authorization server listens on 127.0.0.1: allowed by the operator setting, as an internal provider would be.
  server = await startServerProcess({ OAUTH_ALLOWED_HOSTS: '127.0.0.1' });
  callbackUrl = `http://localhost:${server.port}/v2/auth/callback`;
  idp = await startAuthorizationServer([CLIENT], callbackUrl);
});

afterAll(async () => {
  await server?.kill();
  await idp?.close();
});

describe('the langchain-auth SDK Client against this server', () => {
  it('create → list → get/patch by slug → authenticate → browser → wait → tokens/exists → delete tokens → delete provider, every call 200', async () => {
    const sdk = new LangchainAuthClient(server.url, server.apiKey);
    const slug = 'github';

    const created = await sdk.createOAuthProvider({
      provider_id: slug,
      name: 'GitHub (test IdP)',
      client_id: CLIENT.client_id,
      client_secret: CLIENT.client_secret,
      auth_url: idp.authUrl,
      token_url: idp.tokenUrl,
      uses_pkce: true,
    });
    expect(created).toMatchObject({ provider_id: slug, client_id: 'sdk-app', uses_pkce: true, auth_url: idp.authUrl, token_url: idp.tokenUrl });

    const listed = await sdk.listOAuthProviders();
    expect(listed.map((p) => p.provider_id)).toEqual([slug]);
    expect(listed[0]).toEqual(created);

    expect(await sdk.getOAuthProvider(slug)).toEqual(created);
    const updated = await sdk.updateOAuthProvider(slug, { name: 'GitHub' });
    expect(updated).toMatchObject({ id: created.id, name: 'GitHub' });

    const started = await sdk.authenticate({ provider: slug, scopes: ['repo:read'], user_id: 'alice', ls_user_id: 'ls-user-1' });
    expect(started.status).toBe('pending');
    expect(started.auth_id).toEqual(expect.any(String));
    const waiting = sdk.waitForCompletion(started.auth_id!, 30);

    // The user's browser: the provider's login and consent pages, then back to our callback,
    // delivered at the hosted form of the redirect URI (`/v2/auth/callback/{provider_id}`).
    const redirect = await new Browser().authorize(started.url!, callbackUrl);
    redirect.pathname = `/v2/auth/callback/${slug}`;
    const page = await fetch(redirect, { redirect: 'manual' });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Authorization complete');

    const done = await waiting;
    expect(done.status).toBe('completed');
    expect((await idp.introspect(done.token!, CLIENT)).active).toBe(true);

    const again = await sdk.authenticate({ provider: slug, scopes: ['repo:read'], user_id: 'alice' });
    expect(again).toMatchObject({ status: 'completed', token: done.token });

    expect(await sdk.tokenExists(slug)).toBe(true);
    await sdk.revokeTokens(slug);
    expect(await sdk.tokenExists(slug)).toBe(false);
    expect((await sdk.authenticate({ provider: slug, scopes: ['repo:read'], user_id: 'alice' })).status).toBe('pending');

    const message = await sdk.deleteOAuthProvider(slug);
    expect(message).toContain(slug);
    expect(await sdk.listOAuthProviders()).toEqual([]);

    expect(sdk.calls).toHaveLength(13);
    expect(sdk.calls.filter((call) => call.status !== 200)).toEqual([]);
  });
});
