import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/** A client registered at the test authorization server. */
export type TestClient = {
  client_id: string;
  /** Empty for a public client (`none`). */
  client_secret: string;
  token_endpoint_auth_method: 'client_secret_post' | 'client_secret_basic' | 'none';
  /** The provider refuses an authorization request without PKCE for this client. */
  requirePkce?: boolean;
  /** Access-token lifetime in seconds (default 3600). */
  accessTokenTtl?: number;
};

export type AuthorizationServer = {
  issuer: string;
  authUrl: string;
  tokenUrl: string;
  introspect(token: string, client: TestClient): Promise<{ active: boolean; scope?: string; client_id?: string; sub?: string }>;
  /** RFC 7009 revocation at the provider (this server's policy: revoking any token revokes its whole grant). */
  revoke(token: string, client: TestClient): Promise<number>;
  /** Every access and refresh token value the provider has issued, to look for in our database file. */
  issuedTokens: Set<string>;
  close(): Promise<void>;
};

/**
 * A real OAuth 2.0 / OpenID Connect authorization server (panva's `oidc-provider`) on a loopback
 * port, with its built-in development login and consent pages. Nothing in it is written for
 * these tests beyond its configuration.
 */
export async function startAuthorizationServer(clients: TestClient[], redirectUri: string): Promise<AuthorizationServer> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const byId = new Map(clients.map((c) => [c.client_id, c]));

  const provider = new Provider(issuer, {
    clients: clients.map((c) => ({
      client_id: c.client_id,
      ...(c.token_endpoint_auth_method === 'none' ? {} : { client_secret: c.client_secret }),
      token_endpoint_auth_method: c.token_endpoint_auth_method,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    })),
    scopes: ['openid', 'offline_access', 'repo:read', 'repo:write', 'profile'],
    pkce: { required: (_ctx: unknown, client: { clientId: string }) => byId.get(client.clientId)?.requirePkce === true },
    features: {
      devInteractions: { enabled: true },
      introspection: { enabled: true },
      revocation: { enabled: true },
    },
    // Refresh tokens for every client allowed the grant, not only with offline_access.
    issueRefreshToken: async (_ctx: unknown, client: { grantTypeAllowed(type: string): boolean }) => client.grantTypeAllowed('refresh_token'),
    revokeGrantPolicy: () => true,
    ttl: {
      AccessToken: (_ctx: unknown, _token: unknown, client: { clientId: string }) => byId.get(client.clientId)?.accessTokenTtl ?? 3600,
      AuthorizationCode: 60,
      RefreshToken: 86_400,
      Grant: 86_400,
      Session: 86_400,
      Interaction: 600,
      IdToken: 3600,
    },
    findAccount: async (_ctx: unknown, id: string) => ({ accountId: id, claims: async () => ({ sub: id }) }),
    cookies: { keys: ['test-cookie-key-not-secret'] },
  });
  server.on('request', provider.callback());
  const issuedTokens = new Set<string>();
  // Opaque tokens: the value handed to the client is the model's jti.
  provider.on('access_token.saved', (token: { jti: string }) => issuedTokens.add(token.jti));
  provider.on('refresh_token.saved', (token: { jti: string }) => issuedTokens.add(token.jti));

  // Introspection and revocation authenticate as the client, with the client's own method.
  const post = async (path: string, client: TestClient, fields: Record<string, string>) => {
    const form = new URLSearchParams(fields);
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if (client.token_endpoint_auth_method === 'client_secret_basic') {
      headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(client.client_id)}:${encodeURIComponent(client.client_secret)}`).toString('base64')}`;
    } else {
      form.set('client_id', client.client_id);
      form.set('client_secret', client.client_secret);
    }
    return fetch(issuer + path, { method: 'POST', headers, body: form.toString() });
  };

  return {
    issuer,
    issuedTokens,
    authUrl: `${issuer}/auth`,
    tokenUrl: `${issuer}/token`,
    async introspect(token, client) {
      const response = await post('/token/introspection', client, { token });
      if (response.status !== 200) throw new Error(`introspection: ${response.status} ${await response.text()}`);
      return (await response.json()) as { active: boolean; scope?: string; client_id?: string };
    },
    async revoke(token, client) {
      return (await post('/token/revocation', client, { token })).status;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
