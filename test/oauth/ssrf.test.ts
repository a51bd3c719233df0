import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { type AddressInfo, createServer as createTcpServer, type Socket, type Server as TcpServer } from 'node:net';
import { getCACertificates, setDefaultCACertificates, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { embeddedIpv4, isForbiddenAddress, OutboundPolicy, type Resolve } from '../../server/domain/oauth/outbound.ts';
import { requestToken } from '../../server/domain/oauth/token-request.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * A tenant's `token_url` / `auth_url` may not make the server reach its own machine,
 * its networks or a metadata service. Name resolution is injected (a simulated resolver) where a
 * test needs a name to resolve to a chosen address; everything else is real: real listening
 * sockets on loopback, real HTTP requests, the real app.
 */

/** A simulated DNS: fixed answers per name; `rebind.test` answers a public address once, then loopback. */
function simulatedResolver(): Resolve & { calls: string[] } {
  let rebindCalls = 0;
  const calls: string[] = [];
  const resolve = async (hostname: string) => {
    calls.push(hostname);
    switch (hostname) {
      case 'localhost':
        return [{ address: '127.0.0.1', family: 4 }];
      case 'internal.test':
        return [{ address: '10.0.0.5', family: 4 }];
      case 'metadata.test':
        return [{ address: 'fd00:ec2::254', family: 6 }];
      case 'mixed.test':
        return [
          { address: '93.184.216.34', family: 4 },
          { address: '127.0.0.1', family: 4 },
        ];
      case 'public.test':
        return [{ address: '93.184.216.34', family: 4 }];
      case 'rebind.test':
        rebindCalls += 1;
        return [{ address: rebindCalls === 1 ? '93.184.216.34' : '127.0.0.1', family: 4 }];
      case 'idp.pinned.test':
        return [{ address: '127.0.0.1', family: 4 }];
      default:
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    }
  };
  return Object.assign(resolve, { calls });
}

/** A plain HTTP server on loopback that counts connections and answers token requests. */
async function tokenServer(): Promise<{
  port: number;
  connections: () => number;
  requests: Array<{ host: string | undefined; body: string }>;
  close(): Promise<void>;
}> {
  let connections = 0;
  const requests: Array<{ host: string | undefined; body: string }> = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      requests.push({ host: req.headers.host, body });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: 'pinned-access-token', token_type: 'Bearer', expires_in: 3600 }));
    });
  });
  server.on('connection', () => (connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let n = 0;
function providerBody(overrides: Record<string, unknown> = {}) {
  n += 1;
  return {
    provider_id: `ssrf-${n}`,
    name: 'Provider',
    client_id: 'client',
    client_secret: 'secret-value-0123456789',
    auth_url: 'https://public.test/authorize',
    token_url: 'https://public.test/token',
    ...overrides,
  };
}

const resolver = simulatedResolver();
let ctx: Awaited<ReturnType<typeof inProcessApp>>;
let allowed: Awaited<ReturnType<typeof inProcessApp>>;
beforeAll(async () => {
  ctx = await inProcessApp({ oauthResolve: resolver });
  allowed = await inProcessApp({ oauthResolve: resolver, env: { OAUTH_ALLOWED_HOSTS: 'localhost, 127.0.0.1:4444, internal.test, [::1]' } });
});
afterAll(() => {
  ctx.close();
  allowed.close();
});

describe('addresses a provider URL may not reach', () => {
  it('refuses loopback, private, link-local, unique-local, CGNAT, metadata and IPv4-in-IPv6 forms; accepts public ones', () => {
    for (const address of [
      '127.0.0.1',
      '127.1.2.3',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '100.100.100.200',
      '0.0.0.0',
      '192.0.0.192',
      '::1',
      '::',
      'fd00:ec2::254',
      'fc00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:a9fe:a9fe',
      '0:0:0:0:0:ffff:10.0.0.1',
      '64:ff9b::a9fe:a9fe',
      '2002:7f00:1::',
      'not-an-address',
    ]) {
      expect(isForbiddenAddress(address), address).toBe(true);
    }
    for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8', '100.128.0.1', '172.32.0.1']) {
      expect(isForbiddenAddress(address), address).toBe(false);
    }
    expect(embeddedIpv4('::ffff:7f00:1')).toBe('127.0.0.1');
    expect(embeddedIpv4('2001:db8::1')).toBeNull();
  });
});

describe('OAUTH_ALLOWED_HOSTS', () => {
  it('takes host and host:port entries, and refuses to start on anything else, saying which entry', () => {
    expect(loadConfig({ OAUTH_ALLOWED_HOSTS: 'idp.internal, 127.0.0.1:8443, [::1]' }).OAUTH_ALLOWED_HOSTS).toBe('idp.internal, 127.0.0.1:8443, [::1]');
    for (const bad of ['http://idp.internal', 'idp.internal/path', 'host:port', '::1', 'idp.internal:70000', '[zz::1]']) {
      expect(() => loadConfig({ OAUTH_ALLOWED_HOSTS: bad }), bad).toThrow(/OAUTH_ALLOWED_HOSTS: '.*' is not a host or host:port/);
    }
  });
});

describe('provider create and PATCH', () => {
  it('refuses endpoints on forbidden addresses with a 422 naming the field', async () => {
    const refused: Array<[string, string]> = [
      ['token_url', 'http://127.0.0.1:8080/token'],
      ['token_url', 'https://10.1.2.3/token'],
      ['token_url', 'https://169.254.169.254/latest/meta-data/'],
      ['token_url', 'http://[::1]:8080/token'],
      ['token_url', 'https://[::ffff:127.0.0.1]/token'],
      ['token_url', 'https://[::ffff:a9fe:a9fe]/token'],
      ['token_url', 'https://100.64.3.4/token'],
      ['token_url', 'https://[fd00:ec2::254]/token'],
      ['token_url', 'http://localhost:9999/token'],
      ['token_url', 'https://internal.test/token'],
      ['token_url', 'https://metadata.test/token'],
      ['token_url', 'https://mixed.test/token'],
      ['auth_url', 'https://10.0.0.1/authorize'],
      ['auth_url', 'http://localhost/authorize'],
    ];
    for (const [field, url] of refused) {
      const response = await ctx.api.post('/v2/auth/providers', providerBody({ [field]: url }));
      expect(response.status, url).toBe(422);
      expect(response.body.detail, url).toEqual([{ loc: ['body', field], msg: expect.stringContaining('may not contact'), type: 'value_error' }]);
    }
    // Nothing was stored.
    expect((await ctx.api.get('/v2/auth/providers')).body).toEqual([]);

    const created = await ctx.api.post('/v2/auth/providers', providerBody());
    expect(created.status).toBe(200);
    const patched = await ctx.api.patch(`/v2/auth/providers/${created.body.provider_id}`, {
      token_url: 'https://169.254.169.254/token',
      client_secret: 'new-secret-0123456789',
    });
    expect(patched.status).toBe(422);
    expect(patched.body.detail[0].loc).toEqual(['body', 'token_url']);
    expect((await ctx.api.get(`/v2/auth/providers/${created.body.provider_id}`)).body.token_url).toBe('https://public.test/token');
  });

  it('accepts the hosts an operator lists in OAUTH_ALLOWED_HOSTS (with their port, when one is given)', async () => {
    for (const url of ['http://localhost:9999/token', 'http://127.0.0.1:4444/token', 'https://internal.test/token', 'http://[::1]:1234/token']) {
      expect((await allowed.api.post('/v2/auth/providers', providerBody({ token_url: url }))).status, url).toBe(200);
    }
    // 127.0.0.1 is allowed on port 4444 only.
    expect((await allowed.api.post('/v2/auth/providers', providerBody({ token_url: 'http://127.0.0.1:5555/token' }))).status).toBe(422);
    expect((await allowed.api.post('/v2/auth/providers', providerBody({ token_url: 'https://10.9.9.9/token' }))).status).toBe(422);
  });
});

describe('at request time', () => {
  async function startFlow(app: typeof ctx, overrides: Record<string, unknown>) {
    const created = await app.api.post('/v2/auth/providers', providerBody(overrides));
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const started = (await app.api.post('/v2/auth/authenticate', { provider: created.body.provider_id, scopes: ['read'] })).body;
    return { authId: started.auth_id as string, state: new URL(started.url).searchParams.get('state')! };
  }
  async function callback(app: typeof ctx, state: string) {
    const response = await app.app.request(`/v2/auth/callback?state=${encodeURIComponent(state)}&code=the-code`);
    return { status: response.status, html: await response.text() };
  }

  it('DNS rebinding is defeated: a name that resolved to a public address at create and to loopback at the exchange is not contacted', async () => {
    const server = await tokenServer();
    try {
      const { authId, state } = await startFlow(ctx, { token_url: `https://rebind.test:${server.port}/token` });
      const page = await callback(ctx, state);
      expect(page.status).toBe(502);
      expect(page.html).toContain('may not contact');
      // The loopback server the second answer pointed at saw no connection at all.
      expect(server.connections()).toBe(0);
      const waited = (await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body;
      expect(waited).toMatchObject({ status: 'failed', error: 'token_exchange_failed', error_description: expect.stringContaining('may not contact') });
    } finally {
      await server.close();
    }
  });

  it('a provider stored before this check (straight in the database) is refused at the exchange', async () => {
    const server = await tokenServer();
    try {
      const { authId, state } = await startFlow(ctx, {});
      await ctx.sql
        .prepare("UPDATE oauth_providers SET token_url = ? WHERE token_url = 'https://public.test/token'")
        .run(`http://127.0.0.1:${server.port}/token`);
      expect((await callback(ctx, state)).status).toBe(502);
      expect(server.connections()).toBe(0);
      expect((await ctx.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body.status).toBe('failed');
    } finally {
      await server.close();
    }
  });

  it('the connection goes to the address that was checked, with the name kept in Host', async () => {
    const server = await tokenServer();
    try {
      // `idp.pinned.test` exists only in the simulated resolver: the request can only have reached
      // the server through the address the policy resolved and handed to the socket.
      const policy = new OutboundPolicy({ allowedHosts: 'idp.pinned.test', resolve: resolver });
      const url = `http://idp.pinned.test:${server.port}/token`;
      const result = await requestToken(
        { tokenUrl: url, clientId: 'c', clientSecret: 's', authMethod: 'client_secret_post' },
        { grant_type: 'authorization_code', code: 'x' },
        policy,
      );
      expect(result).toMatchObject({ ok: true, token: { accessToken: 'pinned-access-token', expiresIn: 3600 } });
      expect(server.requests).toHaveLength(1);
      expect(server.requests[0]!.host).toBe(`idp.pinned.test:${server.port}`);
      // Without the allowance the same name is refused before any connection.
      const strict = new OutboundPolicy({ allowedHosts: '', resolve: resolver });
      const refused = await requestToken(
        { tokenUrl: url, clientId: 'c', clientSecret: 's', authMethod: 'client_secret_post' },
        { grant_type: 'authorization_code', code: 'x' },
        strict,
      );
      expect(refused).toMatchObject({ ok: false, kind: 'unavailable', error: 'token_endpoint_forbidden' });
      expect(server.requests).toHaveLength(1);
    } finally {
      await server.close();
    }
  });

  it('https: the TLS connection goes to the pinned address, with SNI and the certificate check on the name', async () => {
    const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url));
    const cert = fixture('idp-pinned-test.cert.pem');
    const server = createHttpsServer({ key: fixture('idp-pinned-test.key.pem'), cert }, (req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ access_token: 'tls-token' }));
      });
    });
    const names: string[] = [];
    server.on('secureConnection', (socket: TLSSocket) => names.push(String((socket as TLSSocket & { servername?: string }).servername)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const policy = new OutboundPolicy({ allowedHosts: 'idp.pinned.test', resolve: resolver });
    const client = { tokenUrl: `https://idp.pinned.test:${port}/token`, clientId: 'c', clientSecret: 's', authMethod: 'client_secret_post' as const };
    const defaults = getCACertificates('default');
    try {
      // Not trusted yet: the certificate is checked (for the name), so the exchange fails.
      expect(await requestToken(client, { grant_type: 'authorization_code', code: 'x' }, policy)).toMatchObject({
        ok: false,
        error: 'token_endpoint_unreachable',
      });
      // Trusted for this test only: the name only the simulated resolver knows is reached over TLS.
      setDefaultCACertificates([...defaults, cert.toString()]);
      expect(await requestToken(client, { grant_type: 'authorization_code', code: 'x' }, policy)).toMatchObject({
        ok: true,
        token: { accessToken: 'tls-token' },
      });
      expect(names.at(-1)).toBe('idp.pinned.test');
    } finally {
      setDefaultCACertificates(defaults);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('the error tells nothing about ports: a closed port and a port that resets the connection read the same', async () => {
    // A port nothing listens on: take a free one and close it again.
    const probe: TcpServer = createTcpServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const closedPort = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    // A port that accepts and drops at once.
    const reset: TcpServer = createTcpServer((socket: Socket) => socket.destroy());
    await new Promise<void>((resolve) => reset.listen(0, '127.0.0.1', resolve));
    const resetPort = (reset.address() as AddressInfo).port;
    try {
      const answers = [];
      for (const port of [closedPort, resetPort]) {
        const { authId, state } = await startFlow(allowed, { token_url: `http://localhost:${port}/token` });
        const page = await callback(allowed, state);
        const waited = (await allowed.api.get(`/v2/auth/wait/${authId}?timeout=0`)).body;
        answers.push({ status: page.status, html: page.html.replace(/ssrf-\d+/g, ''), waited });
      }
      expect(answers[0]).toEqual(answers[1]);
      expect(answers[0]!.waited).toEqual({
        status: 'failed',
        token: null,
        error: 'token_exchange_failed',
        error_description: 'The token endpoint could not be reached.',
      });
      expect(JSON.stringify(answers)).not.toMatch(/ECONN|EPIPE|socket|127\.0\.0\.1/);
    } finally {
      await new Promise<void>((resolve) => reset.close(() => resolve()));
    }
  });
});
