import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadConfig } from '../server/config.ts';
import { createControlPlane } from '../server/control-plane.ts';
import { hashApiKey } from '../server/crypto/api-key.ts';
import { SecretBox } from '../server/crypto/secret-box.ts';
import { systemClock } from '../server/lib/clock.ts';
import { silentLogger } from '../server/logger.ts';
import { openStore } from '../server/store/open.ts';
import type { SqliteStore } from '../server/store/sqlite.ts';
import { GithubOidcIssuer } from '../test/helpers/github-oidc-issuer.ts';

/**
 * `node bench/keyless-exchange.ts [exchanges]`: what one keyless-CI exchange costs in the server
 * (RS256 verification with the cached issuer keys, trust look-up, the jti and the key written in
 * one transaction on SQLite with synchronous=FULL), beside `POST /v1/api-keys` (one key written,
 * no token) in alternating rounds; then a flood of tokens naming unknown kids: how long the server
 * takes to refuse them and how many times it reads the issuer meanwhile. In process
 * (`app.request`), with the issuer on a loopback port; tokens are signed before timing starts.
 */
const total = Number(process.argv[2] ?? 600);
const rounds = 5;
const flood = 5000;

const issuer = await new GithubOidcIssuer().start();
const path = join(mkdtempSync(join(tmpdir(), 'bench-keyless-')), 'cp.db');
const secretBox = new SecretBox(randomBytes(32));
const backend = await openStore(path, { secretBox, synchronous: 'FULL' });
const apiKey = `bench-${crypto.randomUUID()}`;
const boot = await (backend.core as SqliteStore).bootstrap({ keyHash: hashApiKey(apiKey), keyId: crypto.randomUUID(), now: systemClock.now() });
const config = loadConfig({
  LOG_LEVEL: 'silent',
  DATABASE_URL: path,
  GITHUB_OIDC_ISSUER: issuer.url,
  GITHUB_OIDC_AUDIENCE: issuer.audience,
  RECONCILE_INTERVAL_MS: '0',
});
const plane = createControlPlane({ backend, clock: systemClock, log: silentLogger, config, secretBox, publicUrl: () => 'http://localhost' });
await plane.start();
const { app } = plane;
const json = { 'content-type': 'application/json' };
const keyed = { ...json, 'x-api-key': apiKey };

const trust = await app.request(`/v1/workspaces/${boot.workspaceId}/github-trust`, {
  method: 'POST',
  headers: keyed,
  body: JSON.stringify({ repository_id: 4242, repository_owner_id: 77, ref: 'refs/heads/main' }),
});
if (trust.status !== 201) throw new Error(`trust entry: ${trust.status} ${await trust.text()}`);

async function exchanges(tokens: string[]): Promise<number[]> {
  const times: number[] = [];
  for (const token of tokens) {
    const start = performance.now();
    const response = await app.request('/v1/auth/github-actions/token', { method: 'POST', headers: json, body: JSON.stringify({ token }) });
    await response.text();
    times.push(performance.now() - start);
    if (response.status !== 201) throw new Error(`exchange answered ${response.status}`);
  }
  return times;
}

async function keyCreates(n: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    const response = await app.request('/v1/api-keys', {
      method: 'POST',
      headers: keyed,
      body: JSON.stringify({ workspace_id: boot.workspaceId, description: 'bench' }),
    });
    await response.text();
    times.push(performance.now() - start);
    if (response.status !== 201) throw new Error(`key create answered ${response.status}`);
  }
  return times;
}

const quantile = (values: number[], q: number) => [...values].sort((x, y) => x - y)[Math.min(values.length - 1, Math.floor(q * values.length))]!;
const perRound = Math.ceil(total / rounds);
const tokens = await Promise.all(Array.from({ length: perRound * rounds + 20 }, () => issuer.token()));
await exchanges(tokens.splice(0, 20));
await keyCreates(20);
const exchange: number[] = [];
const create: number[] = [];
for (let r = 0; r < rounds; r++) {
  exchange.push(...(await exchanges(tokens.splice(0, perRound))));
  create.push(...(await keyCreates(perRound)));
}

const forged = await Promise.all(Array.from({ length: flood }, (_, i) => issuer.token({ unpublishedKey: true, kid: `made-up-${i}` })));
const jwksBefore = issuer.hitCount('/.well-known/jwks');
const floodStart = performance.now();
const statuses = await Promise.all(
  forged.map(async (token) => (await app.request('/v1/auth/github-actions/token', { method: 'POST', headers: json, body: JSON.stringify({ token }) })).status),
);
const floodMs = performance.now() - floodStart;

const fmt = (ms: number) => `${ms.toFixed(2)} ms`;
console.log(`exchanges: ${exchange.length}, in ${rounds} rounds alternating with as many POST /v1/api-keys (SQLite, synchronous=FULL)`);
console.log(`  exchange         p50 ${fmt(quantile(exchange, 0.5))}  p99 ${fmt(quantile(exchange, 0.99))}`);
console.log(`  POST /v1/api-keys p50 ${fmt(quantile(create, 0.5))}  p99 ${fmt(quantile(create, 0.99))}`);
console.log(
  `flood: ${flood} tokens with unknown kids at once: ${statuses.filter((s) => s === 401).length} answered 401 in ${fmt(floodMs)} (${fmt(floodMs / flood)} each); issuer JWKS reads meanwhile: ${issuer.hitCount('/.well-known/jwks') - jwksBefore}`,
);

plane.stop();
await backend.close();
await issuer.stop();
