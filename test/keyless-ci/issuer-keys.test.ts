import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Unauthorized, Unavailable } from '../../server/domain/errors.ts';
import { IssuerKeys, REFETCH_INTERVAL_MS } from '../../server/domain/github-oidc/issuer-keys.ts';
import { verifyGithubToken } from '../../server/domain/github-oidc/verify-token.ts';
import { silentLogger } from '../../server/logger.ts';
import { GithubOidcIssuer } from '../helpers/github-oidc-issuer.ts';
import { movableClock } from '../helpers/movable-clock.ts';

describe("the issuer's keys: discovery, cache, refetch for an unknown kid at most once a minute", () => {
  let issuer: GithubOidcIssuer;

  beforeAll(async () => {
    issuer = await new GithubOidcIssuer().start();
  });
  afterAll(() => issuer?.stop());

  const verify = (keys: IssuerKeys, token: string, now = new Date()) =>
    verifyGithubToken(token, { issuer: issuer.url, audience: issuer.audience, now, keyFor: (header) => keys.keyFor(header) });

  it('reads discovery and JWKS once, then serves known kids from the cache; a flood of unknown kids makes no request', async () => {
    const clock = movableClock();
    const keys = new IssuerKeys({ issuer: issuer.url, clock, log: silentLogger });
    const jwksBefore = issuer.hitCount('/.well-known/jwks');
    const discoveryBefore = issuer.hitCount('/.well-known/openid-configuration');
    for (let i = 0; i < 5; i++) expect((await verify(keys, await issuer.token())).repository_id).toBe('4242');
    expect(issuer.hitCount('/.well-known/jwks') - jwksBefore).toBe(1);
    expect(issuer.hitCount('/.well-known/openid-configuration') - discoveryBefore).toBe(1);

    // 200 tokens, each naming a kid nobody publishes, all at once.
    const forged = await Promise.all(Array.from({ length: 200 }, (_, i) => issuer.token({ unpublishedKey: true, kid: `made-up-${i}` })));
    const outcomes = await Promise.allSettled(forged.map((token) => verify(keys, token)));
    expect(outcomes.every((o) => o.status === 'rejected' && o.reason instanceof Unauthorized && /\bkid\b/.test(o.reason.message))).toBe(true);
    expect(issuer.hitCount('/.well-known/jwks') - jwksBefore).toBe(1);
    expect(keys.fetches).toBe(1);
  });

  it('picks up a rotated key when its kid first appears a minute after the last read, and only then', async () => {
    // Standing: only the moves below pass time, so a slow machine cannot let the minute run out before the first verify.
    const clock = movableClock({ standing: true });
    const keys = new IssuerKeys({ issuer: issuer.url, clock, log: silentLogger });
    await verify(keys, await issuer.token());
    const jwksBefore = issuer.hitCount('/.well-known/jwks');
    issuer.rotate();
    const rotated = await issuer.token();
    // Within the minute: no reread, the new kid is unknown.
    clock.advance(REFETCH_INTERVAL_MS - 1000);
    await expect(verify(keys, rotated, new Date(clock.now()))).rejects.toThrow(/\bkid\b/);
    expect(issuer.hitCount('/.well-known/jwks')).toBe(jwksBefore);
    // A minute after the last read: one reread, and the token verifies; a flood right after makes no more.
    clock.advance(1000);
    const fresh = await issuer.token();
    const results = await Promise.allSettled(
      [fresh, ...(await Promise.all(Array.from({ length: 20 }, (_, i) => issuer.token({ kid: `other-${i}`, unpublishedKey: true }))))].map((token) =>
        verify(keys, token, new Date(clock.now())),
      ),
    );
    expect(results[0]!.status).toBe('fulfilled');
    expect(results.slice(1).every((r) => r.status === 'rejected')).toBe(true);
    expect(issuer.hitCount('/.well-known/jwks') - jwksBefore).toBe(1);
  });

  describe('an issuer that misbehaves', () => {
    let server: Server;
    let url: string;
    let mode: 'huge' | 'slow' | 'redirect' | 'other-issuer' | 'down' = 'huge';
    let requests = 0;

    beforeAll(async () => {
      server = createServer((_req, res) => {
        requests += 1;
        if (mode === 'down') return void res.writeHead(500).end('{}');
        if (mode === 'redirect') return void res.writeHead(302, { location: `${issuer.url}/.well-known/openid-configuration` }).end();
        if (mode === 'slow') return; // never answers
        if (mode === 'other-issuer')
          return void res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ issuer: 'https://elsewhere.example', jwks_uri: `${url}/jwks` }));
        // A discovery document that never ends.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(`{"issuer": "${url}", "padding": "`);
        const chunk = 'x'.repeat(64 * 1024);
        const timer = setInterval(() => res.write(chunk), 1);
        res.on('close', () => clearInterval(timer));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });

    for (const [what, m, problem] of [
      ['an endless answer is cut at the size limit', 'huge', /more than 262144 bytes/],
      ['a redirect is not followed', 'redirect', /could not be reached/],
      ['a discovery document naming another issuer is refused', 'other-issuer', /another issuer/],
      ['an error status is reported', 'down', /HTTP 500/],
      ['a silent issuer is given up on after the time limit', 'slow', /could not be reached/],
    ] as const) {
      it(`${what} (503 with Retry-After, never a 500)`, async () => {
        mode = m;
        const keys = new IssuerKeys({ issuer: url, clock: movableClock(), log: silentLogger, timeoutMs: 500 });
        const token = await issuer.token({ issuer: url });
        const error = await verifyGithubToken(token, { issuer: url, audience: issuer.audience, now: new Date(), keyFor: (h) => keys.keyFor(h) }).catch(
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(Unavailable);
        expect((error as Unavailable).message).toMatch(problem);
        expect((error as Unavailable).retryAfterSeconds).toBeGreaterThan(0);
        // Asked again at once: the issuer is not asked again (reads are spaced even when they fail).
        const before = requests;
        await expect(keys.keyFor({ alg: 'RS256', kid: 'x' })).rejects.toBeInstanceOf(Unavailable);
        expect(requests).toBe(before);
      });
    }
  });
});
