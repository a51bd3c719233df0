/**
 * `node [--cpu-prof --cpu-prof-dir=DIR] bench/profile-long-poll.ts [waiters] [--rounds=N] [--hono-only]`:
 * the in-process app on a loopback port holds `waiters` conditional long-polls on one revision
 * (held by the C holder, bench/native/loadgen.c, in processes of their own, so this process's CPU
 * is the server's), then interrupts it through the API. A bare node:http server in this process
 * holds as many the same way and answers them the server's bytes (the same body, the same five
 * headers, a request id each), alternating with the server round by round. Prints, per round, this
 * process's CPU time (`process.cpuUsage`, which holds on a loaded machine):
 * - the interrupt, whole: its route, the change's transaction, the read back, and the wake-up;
 * - the wake-up alone (`watch.notify`, which answers every waiter before it returns), against the
 *   bare server's loop writing the same answers;
 * - garbage collections during each (count and pause), what each allocated (the used heap's growth,
 *   when no collection ran), and when the holders read the first and
 *   last answer, from the start of the interrupt (wall clock: noisy on a shared machine).
 *
 * Instruction counts, which hold on a loaded machine (no hardware counters here, so callgrind): each
 * measured window is bracketed by `os.loadavg()` and `os.uptime()`, called nowhere else while the
 * rounds run, so callgrind zeroes its counts before the first and dumps them before the second:
 *   valgrind --tool=callgrind --smc-check=all-non-file --zero-before=uv_loadavg --dump-before=uv_uptime \
 *     --callgrind-out-file=DIR/cg.%p node bench/profile-long-poll.ts 1000 --rounds=4 [--window=interrupt]
 * gives one dump per round (`summary:` is the window's instructions), the server's and the bare
 * server's alternating as the rounds do, the warm-up round first. `--window=interrupt` brackets
 * the server's whole interrupt (its request through the app, the route, the transaction and the
 * wake-up, to its answer) instead of the wake-up alone.
 */

import { createServer, type ServerOptions } from 'node:http';
import { loadavg, uptime } from 'node:os';
import { PerformanceObserver } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { type ServerType, serve } from '@hono/node-server';
import { type NodeListener, revisionFastPath } from '../server/http/revision-fast-lane.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { inProcessApp } from '../test/helpers/in-process.ts';
import { bareHoldingServer } from './lib/bare-holding-server.ts';
import { holdNative, nativeLoadgen, nativeLoadgenMissing } from './lib/native.ts';

const waiters = Number(process.argv[2] && !process.argv[2].startsWith('--') ? process.argv[2] : 1000);
const rounds = Number(process.argv.find((a) => a.startsWith('--rounds='))?.slice('--rounds='.length) ?? 5);
/** What callgrind's window (`loadavg` … `uptime`, above) brackets on the server's side. */
const wholeInterrupt = process.argv.includes('--window=interrupt');
if (!nativeLoadgen()) throw new Error(`this profile needs the C holder: ${nativeLoadgenMissing}`);
const HOLDERS = 2;

const t = await inProcessApp({ stageMs: 3_600_000 });
await workspaceFixtures(t.api);
const k8s = await t.api.post('/v2/listeners', { compute_type: 'k8s', compute_id: `k8s-${uniqueName()}` });
if (k8s.status !== 201) throw new Error(`set-up failed: listener ${k8s.status}`);
// As `startServer` wires it: the revision fast path in front of Hono (`--hono-only` leaves it out).
const withFastPath = ((options: ServerOptions, listener: NodeListener) => createServer(options, revisionFastPath(t.services, listener))) as typeof createServer;
const server = await new Promise<ServerType>((resolve) => {
  const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1', createServer: process.argv.includes('--hono-only') ? undefined : withFastPath }, () =>
    resolve(s),
  );
});
const port = (server.address() as { port: number }).port;

// The bare server: held responses answered, on release, with the server's bytes.
const { server: bare, held, release, port: barePort } = await bareHoldingServer();

// Garbage collections, kept with their start (the observer's entries arrive after the fact): counted by the window they started in.
const collections: { startTime: number; duration: number }[] = [];
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) collections.push({ startTime: entry.startTime, duration: entry.duration });
}).observe({ entryTypes: ['gc'] });
const gcsBetween = (from: number, to: number) => {
  const within = collections.filter((c) => c.startTime >= from && c.startTime <= to);
  return { gcs: within.length, gcMs: within.reduce((sum, c) => sum + c.duration, 0) };
};

// The wake-up alone: `notify` answers every waiter before it returns.
const watch = t.services.watch;
const notify = watch.notify.bind(watch);
let wake = { cpuMs: 0, wallMs: 0, heapBytes: 0 };
watch.notify = (id: string, value?: unknown) => {
  const heap = getHeapStatistics().used_heap_size;
  const cpu = process.cpuUsage();
  const at = performance.now();
  if (!wholeInterrupt) loadavg();
  notify(id, value);
  if (!wholeInterrupt) uptime();
  const used = process.cpuUsage(cpu);
  wake = { cpuMs: (used.user + used.system) / 1000, wallMs: performance.now() - at, heapBytes: getHeapStatistics().used_heap_size - heap };
};

const cpuMs = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1000;
};
const holdAll = async (url: string, headers: Record<string, string>) => {
  const holders = Array.from({ length: HOLDERS }, (_, i) => holdNative(url, headers, Math.floor(waiters / HOLDERS) + (i < waiters % HOLDERS ? 1 : 0)));
  await Promise.all(holders.map((h) => h.connected));
  const answers = Promise.all(holders.map((h) => h.answers)).then((all) => ({
    firstAt: Math.min(...all.map((a) => a.firstAt!)),
    lastAt: Math.max(...all.map((a) => a.lastAt)),
    statuses: all.flatMap((a) => a.statuses),
    bodies: [...new Set(all.flatMap((a) => a.bodies))],
  }));
  return answers;
};
const settle = () => new Promise((r) => setTimeout(r, 300));

type Figures = { cpuMs: number; wakeCpuMs: number; heapKb: number; gcs: number; gcMs: number; firstMs: number; lastMs: number };
const ours: Figures[] = [];
const floor: Figures[] = [];
let lastBody = '';
let lastEtag = '';

async function runOurs(): Promise<void> {
  // A k8s listener's revision waits for its agent, which never comes: nothing but the interrupt moves it.
  // (Such a deployment must carry the license key its image needs.)
  const created = await t.api.post(
    '/v2/deployments',
    dockerBody(uniqueName(), k8s.body.id, { secrets: [{ name: 'LANGSMITH_API_KEY', value: 'lsv2-profile' }] }),
  );
  if (created.status !== 201) throw new Error(`set-up failed: deployment ${created.status} ${JSON.stringify(created.body)}`);
  const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
  const etag = (await t.api.get(path)).headers.get('etag')!;
  const answers = holdAll(`http://127.0.0.1:${port}${path}`, { 'x-api-key': t.apiKey, 'if-none-match': etag, prefer: 'wait=60' });
  while (watch.size < waiters) await new Promise((r) => setTimeout(r, 20));
  await settle();
  const cpu = process.cpuUsage();
  const startedAt = Date.now();
  const from = performance.now();
  if (wholeInterrupt) loadavg();
  const interrupted = await t.api.post(`${path}/interrupt`);
  if (wholeInterrupt) uptime();
  const used = cpuMs(cpu);
  const to = performance.now();
  const result = await answers;
  if (interrupted.status !== 200 || result.statuses.some((s) => s !== 200) || result.bodies.length !== 1)
    throw new Error(`the interrupt answered ${interrupted.status}, or a waiter another answer than the interrupted revision`);
  lastBody = result.bodies[0]!;
  lastEtag = interrupted.headers.get('etag') ?? `"${created.body.latest_revision_id}.x"`;
  ours.push({
    cpuMs: used,
    wakeCpuMs: wake.cpuMs,
    heapKb: wake.heapBytes / 1024,
    ...gcsBetween(from, to),
    firstMs: result.firstAt - startedAt,
    lastMs: result.lastAt - startedAt,
  });
}

async function runBare(): Promise<void> {
  const answers = holdAll(`http://127.0.0.1:${barePort}/wait`, { 'x-api-key': t.apiKey, 'if-none-match': lastEtag, prefer: 'wait=60' });
  while (held.length < waiters) await new Promise((r) => setTimeout(r, 20));
  await settle();
  const cpu = process.cpuUsage();
  const startedAt = Date.now();
  const from = performance.now();
  const heap = getHeapStatistics().used_heap_size;
  loadavg();
  release(lastBody, lastEtag);
  uptime();
  const used = cpuMs(cpu);
  const heapKb = (getHeapStatistics().used_heap_size - heap) / 1024;
  const to = performance.now();
  const result = await answers;
  if (result.bodies.length !== 1 || result.bodies[0] !== lastBody) throw new Error('the bare server answered other bytes');
  floor.push({ cpuMs: used, wakeCpuMs: used, heapKb, ...gcsBetween(from, to), firstMs: result.firstAt - startedAt, lastMs: result.lastAt - startedAt });
}

// A first round of the server's warms it up and gives the bare server its bytes; not counted.
await runOurs();
ours.length = 0;
for (let round = 0; round < rounds; round += 1) {
  if (round % 2 === 0) {
    await runOurs();
    await runBare();
  } else {
    await runBare();
    await runOurs();
  }
}
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const show = (label: string, f: Figures[], key: keyof Figures) =>
  `${label} ${median(f.map((x) => x[key])).toFixed(1)} (${f.map((x) => x[key].toFixed(1)).join(', ')})`;
console.log(`${waiters} waiters, ${rounds} rounds alternated (medians, then per round); load average ${loadavg()[0]!.toFixed(1)}`);
console.log(`  server: ${show('interrupt CPU ms', ours, 'cpuMs')}; ${show('wake-up (notify) CPU ms', ours, 'wakeCpuMs')}`);
console.log(`  bare:   ${show('answer loop CPU ms', floor, 'cpuMs')}`);
// Without a collection in the window (the GCs line), the used heap's growth is what the loop allocated: a count, steady on a loaded machine.
console.log(`  allocated during the wake-up, KiB: server ${show('', ours, 'heapKb')}; bare ${show('', floor, 'heapKb')}`);
console.log(`  server: ${show('GCs', ours, 'gcs')}, ${show('ms', ours, 'gcMs')}; bare: ${show('GCs', floor, 'gcs')}, ${show('ms', floor, 'gcMs')}`);
console.log(`  from the interrupt's start (wall): server ${show('first', ours, 'firstMs')}, ${show('last', ours, 'lastMs')}`);
console.log(`  from the release (wall):           bare   ${show('first', floor, 'firstMs')}, ${show('last', floor, 'lastMs')}`);
server.close();
bare.close();
t.close();
process.exit(0);
