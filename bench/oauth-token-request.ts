import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { isForbiddenAddress, OutboundPolicy } from '../server/domain/oauth/outbound.ts';
import { requestToken } from '../server/domain/oauth/token-request.ts';

/**
 * `node bench/oauth-token-request.ts [requests]`: what the SSRF-safe token request costs. The
 * same loopback token endpoint is asked `requests` times, sequentially, by
 *  - `requestToken` as the server runs it (the host resolved and checked, the connection pinned to
 *    that address, a fresh connection each time: node:http with `agent: false`), and
 *  - a plain `fetch` of the same form (what the code did before: no check, keep-alive reuse),
 * in alternating rounds so both see the same machine load; then the address check alone.
 * Token requests happen once per authorization or refresh, never per API call: this is to know
 * the price, not because it is a hot path.
 */
const total = Number(process.argv[2] ?? 2000);
const rounds = 5;

const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"access_token":"bench-token","token_type":"Bearer","expires_in":3600}');
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.address() as AddressInfo).port;
const tokenUrl = `http://localhost:${port}/token`;
// `localhost` through the real system resolver, allowed as an operator would allow it.
const policy = new OutboundPolicy({ allowedHosts: 'localhost' });
const client = { tokenUrl, clientId: 'c', clientSecret: 's', authMethod: 'client_secret_post' as const };
const params = { grant_type: 'authorization_code', code: 'x', redirect_uri: 'http://localhost/cb' };

async function pinned(n: number): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    const result = await requestToken(client, params, policy);
    if (!result.ok) throw new Error(`request failed: ${JSON.stringify(result)}`);
  }
  return (performance.now() - start) / n;
}

async function plainFetch(n: number): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    const body = new URLSearchParams({ ...params, client_id: 'c', client_secret: 's' }).toString();
    const response = await fetch(tokenUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body,
    });
    await response.text();
  }
  return (performance.now() - start) / n;
}

await pinned(50);
await plainFetch(50);
const a: number[] = [];
const b: number[] = [];
for (let r = 0; r < rounds; r++) {
  a.push(await pinned(total / rounds));
  b.push(await plainFetch(total / rounds));
}
const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

const checks = 1_000_000;
const addresses = ['93.184.216.34', '127.0.0.1', '::ffff:7f00:1', '2606:4700:4700::1111', 'fd00:ec2::254'];
let forbidden = 0;
const checkStart = performance.now();
for (let i = 0; i < checks; i++) if (isForbiddenAddress(addresses[i % addresses.length]!)) forbidden += 1;
const perCheckNs = ((performance.now() - checkStart) * 1e6) / checks;

server.close();
process.stdout.write(
  `${[
    `node ${process.version}; ${total} token requests per variant, ${rounds} alternating rounds, median of rounds`,
    `requestToken (resolve + check + pinned, new connection): ${median(a).toFixed(3)} ms per request`,
    `plain fetch (no check, keep-alive):                      ${median(b).toFixed(3)} ms per request`,
    `ratio: ${(median(a) / median(b)).toFixed(2)}×`,
    `isForbiddenAddress: ${perCheckNs.toFixed(0)} ns per address (${forbidden} of ${checks} forbidden)`,
  ].join('\n')}\n`,
);
