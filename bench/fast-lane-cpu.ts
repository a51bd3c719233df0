/**
 * `node bench/fast-lane-cpu.ts [--root=<checkout>] [--rounds=15] [--calls=20000]`: the GET revision
 * fast lane's own CPU per request, in process: the lane of a checkout (this one by default) called
 * with stand-in Node request and response objects (no socket, no HTTP parsing: those are the same
 * for every server) against what the bare same-SQL server does per request
 * (bench/baselines/http-sqlite.mjs: the same statement on the same row, the same JSON built), on
 * one SQLite file, and the same lane without the observability layer (`observed: false`: no count,
 * no request id), interleaved round by round. Process CPU time (user + system) per call, medians of
 * the rounds; ratios are medians of per-round ratios with their quartiles; and the heap bytes each
 * allocates per call, which the machine's load does not move. It isolates the
 * lane's JavaScript (key check, request id, count, row mapping, promises) from the network stack,
 * and a loaded machine moves it much less than req/s. Run it once per checkout, alternating.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { revisionAnswerText } from './baselines/api-shapes.mjs';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const root = resolve(arg('root') ?? join(import.meta.dirname, '..'));
const rounds = Number(arg('rounds') ?? 15);
const calls = Number(arg('calls') ?? 20_000);
const load = (path: string) => import(pathToFileURL(join(root, path)).href);
const { loadConfig } = await load('server/config.ts');
const { createControlPlane } = await load('server/control-plane.ts');
const { hashApiKey } = await load('server/crypto/api-key.ts');
const { SecretBox } = await load('server/crypto/secret-box.ts');
const { DOMAIN_STORE_RULES } = await load('server/domain/store-rules.ts');
const { revisionFastPath } = await load('server/http/revision-fast-lane.ts');
const { systemClock } = await load('server/lib/clock.ts');
const { silentLogger } = await load('server/logger.ts');
const { openStore } = await load('server/store/open.ts');
const { githubBody } = await import('../test/helpers/fixtures.ts');

const key = `bench-${randomBytes(16).toString('hex')}`;
const config = loadConfig({
  PORT: '0',
  DATABASE_URL: join(mkdtempSync(join(tmpdir(), 'cp-fast-lane-')), 'cp.db'),
  BOOTSTRAP_API_KEY: key,
  SANDBOX_STAGE_MS: '3600000',
});
const secretBox = new SecretBox(randomBytes(32));
const backend = await openStore(config.DATABASE_URL, { secretBox, synchronous: 'FULL', poolSize: 1, log: silentLogger, rules: DOMAIN_STORE_RULES });
await backend.core.bootstrap({ keyHash: hashApiKey(key), keyId: crypto.randomUUID(), now: systemClock.now() });
const controlPlane = createControlPlane({ backend, clock: systemClock, log: silentLogger, config, secretBox, publicUrl: () => 'http://127.0.0.1' });
await controlPlane.start();
const call = async (method: string, path: string, body?: unknown) =>
  (
    await controlPlane.app.request(path, { method, headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body && JSON.stringify(body) })
  ).json();
const integration = await call('POST', '/v1/integrations/github', { installation_id: 5, name: 'acme' });
const created = await call('POST', '/v2/deployments', githubBody('fast-lane', integration.id));
const path = `/v2/deployments/${created.id}/revisions/${created.latest_revision_id}`;
// The key's check is cached by its first request, as on a server that has served the client before.
await call('GET', path);

let pending = 0;
let allAnswered: () => void = () => {};
const response = () => ({
  writeHead(_status: number, _headers: Record<string, unknown>) {
    return this;
  },
  end(_body?: string) {
    pending -= 1;
    if (pending === 0) allAnswered();
  },
  on() {},
  off() {},
  destroyed: false,
  writableEnded: false,
});
const request = { method: 'GET', url: path, headers: { 'x-api-key': key }, rawHeaders: ['x-api-key', key], socket: { remoteAddress: '127.0.0.1' } };
const handedOn = () => {
  throw new Error('the lane handed the request on');
};
const lane = revisionFastPath(controlPlane.services, handedOn);
// The lane without the observability layer (no count, no request id), as bench/observability-cost.ts
// composes it: lane ÷ this is the layer's cost on GET revision (a checkout whose lane has no such
// option answers as `lane`).
const unobserved = revisionFastPath(controlPlane.services, handedOn, { observed: false });
// The checkout's own statement, so the bare server's work is the same SQL as the lane's in each.
const { hotQueries } = await load('server/store/queries/hot-paths.ts');
const { sqliteDialect } = await load('server/store/dialect.ts');
const bareRead = backend.core.db.prepare(hotQueries(sqliteDialect).revision);
/** What http-sqlite.mjs does for the same request, minus the socket. */
function bare(): void {
  const row = bareRead.get(created.latest_revision_id, created.id, created.tenant_id);
  const text = revisionAnswerText(row);
  const res = response();
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), etag: `"${row.id}.${row.version}"` });
  res.end(text);
}
/** `calls` requests at once, as many connections' requests arrive together; resolves when all are answered. */
async function batch(one: () => void): Promise<void> {
  pending = calls;
  const answered = new Promise<void>((done) => (allAnswered = done));
  for (let i = 0; i < calls; i += 1) one();
  await answered;
}
const cpuMicros = () => {
  const used = process.cpuUsage();
  return used.user + used.system;
};
const cases = { lane: () => lane(request, response()), unobserved: () => unobserved(request, response()), bare };
const perCall = { lane: [] as number[], unobserved: [] as number[], bare: [] as number[] };
const names = Object.keys(cases) as Array<keyof typeof cases>;
for (let round = 0; round < rounds; round += 1) {
  // Each goes first in turn, so what the first leaves behind (garbage) is shared.
  for (const name of names.map((_, i) => names[(i + round) % names.length]!)) {
    const before = cpuMicros();
    await batch(cases[name]);
    perCall[name].push((cpuMicros() - before) / calls);
  }
}
/**
 * Heap bytes each case allocates per call: the heap's growth over a few calls made right after a
 * full collection (too few to start another), median of several tries. The stand-in request and
 * response are the same for all three. Garbage is CPU the profiles hardly show: V8 collects the
 * young generation on helper threads too, which the process's CPU time counts.
 */
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
const bytesPerCall = {} as Record<keyof typeof cases, number>;
pending = Number.POSITIVE_INFINITY;
for (const name of names) {
  const tries: number[] = [];
  for (let attempt = 0; attempt < 9; attempt += 1) {
    collect();
    const before = getHeapStatistics().used_heap_size;
    for (let i = 0; i < 100; i += 1) cases[name]();
    // What answers after a promise (a checkout whose read is one) is counted too.
    await new Promise((resolve) => setImmediate(resolve));
    tries.push((getHeapStatistics().used_heap_size - before) / 100);
  }
  bytesPerCall[name] = tries.sort((a, b) => a - b)[4]!;
}
const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
const at = (values: number[], q: number) => sorted(values)[Math.min(values.length - 1, Math.floor(q * values.length))]!.toFixed(3);
const ratio = (top: number[], bottom: number[]) => {
  const ratios = top.map((value, round) => value / bottom[round]!);
  return `${at(ratios, 0.5)} (quartiles ${at(ratios, 0.25)}–${at(ratios, 0.75)})`;
};
console.log(
  `${root}: µs CPU per request, medians: the lane ${at(perCall.lane, 0.5)}, the lane without observability ${at(perCall.unobserved, 0.5)}, the bare server's work ${at(perCall.bare, 0.5)}; ` +
    `lane ÷ bare ${ratio(perCall.lane, perCall.bare)}; lane ÷ unobserved lane ${ratio(perCall.lane, perCall.unobserved)}; ` +
    `heap bytes allocated per call: the lane ${Math.round(bytesPerCall.lane)}, without observability ${Math.round(bytesPerCall.unobserved)}, the bare server's work ${Math.round(bytesPerCall.bare)}; ` +
    `${rounds} rounds of ${calls}; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
);
controlPlane.stop();
await backend.close();
process.exit(0);
