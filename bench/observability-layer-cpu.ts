/**
 * `node bench/observability-layer-cpu.ts [--rounds=21] [--calls=100000]`: the CPU the operator's
 * view adds to one request, measured on the layer alone (contract §17, issue 37's "tracing off ≤ 2%").
 *
 * The whole-server benches (observability-cost.ts, fast-lane-cpu.ts) compare servers whose
 * per-request figures move ±5–10% from round to round on this shared machine: a 2% difference is
 * below what they resolve. Here the layer's own work is timed where it is small and steady, in one
 * process, interleaved round by round, as process CPU time (user + system) per call:
 *
 * - Hono's requests: one real Hono app answering a fixed text, with `observeRequests` (tracing off)
 *   against the same app with only the request scope the audit trail needs (as the bench's
 *   `without` composition keeps it). The difference is what the layer costs a Hono request.
 * - The GET revision fast lane's part of the layer: a request id taken or made, the two clock reads
 *   and the count, as the lane does them (`requestIdFor`, `Metrics.httpAnswered`).
 *
 * Each difference is then set against a request's whole server CPU, which `bench/cpu-per-request.ts`
 * measures (bench/RESULTS.md, "CPU per request"): the figure this prints is the difference in µs.
 */

import { Hono } from 'hono';
import { observeRequests, requestIdFor } from '../server/http/request-id.ts';
import { runInRequestScope } from '../server/lib/request-scope.ts';
import { silentLogger } from '../server/logger.ts';
import { Metrics } from '../server/metrics.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const rounds = Number(arg('rounds') ?? 21);
const calls = Number(arg('calls') ?? 100_000);
const metrics = new Metrics({ githubOutboxPending: async () => 0, agentHeartbeats: async () => [], workPending: async () => [] });

function appWith(middleware: Parameters<Hono['use']>[1]): Hono {
  const app = new Hono();
  app.use('*', middleware);
  app.get('/v2/deployments/:deployment_id', (c) => c.text('ok'));
  return app;
}
const observed = appWith(observeRequests(metrics, silentLogger));
const scopeOnly = appWith((_c, next) => runInRequestScope({ requestId: undefined as unknown as string }, next));
const url = 'http://bench.localhost/v2/deployments/0b1c2d3e-0000-4000-8000-000000000000';

/**
 * What @hono/node-server hands every request as its env: Node's request and response. The layer
 * reads the id header from the first and sets its answer header on the second (node-request.ts),
 * not through Hono's Headers objects; stand-ins with the same two members keep that path.
 */
const nodeEnv = () => ({ incoming: { headers: {}, rawHeaders: [] }, outgoing: { setHeader: (_name: string, _value: string) => undefined } });

async function honoCpuPerCall(app: Hono): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) await app.fetch(new Request(url), nodeEnv());
  const used = process.cpuUsage(before);
  return (used.user + used.system) / calls;
}

/** The fast lane's part of the layer per answer, as revision-fast-lane.ts does it when observed. */
function laneLayerCpuPerCall(): number {
  let sink = 0;
  const before = process.cpuUsage();
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    sink += requestIdFor(undefined).length;
    metrics.httpAnswered('GET', '/v2/deployments/:deployment_id/revisions/:revision_id', 200, (performance.now() - started) / 1000);
  }
  const used = process.cpuUsage(before);
  if (sink === 0) throw new Error('no request ids were made');
  return (used.user + used.system) / calls;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const quartiles = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return `${sorted[Math.floor(sorted.length / 4)]!.toFixed(2)}–${sorted[Math.floor((sorted.length * 3) / 4)]!.toFixed(2)}`;
};

// Warm-up: both apps and the lane's part compiled before the first timed round.
calls > 0 && (await honoCpuPerCall(observed), await honoCpuPerCall(scopeOnly), laneLayerCpuPerCall());
const honoDifferences: number[] = [];
const honoObserved: number[] = [];
const lane: number[] = [];
for (let round = 0; round < rounds; round++) {
  // The apps take turns going first.
  const [first, second] = round % 2 === 0 ? [observed, scopeOnly] : [scopeOnly, observed];
  const a = await honoCpuPerCall(first);
  const b = await honoCpuPerCall(second);
  const [withLayer, without] = first === observed ? [a, b] : [b, a];
  honoDifferences.push(withLayer - without);
  honoObserved.push(withLayer);
  lane.push(laneLayerCpuPerCall());
}
console.log(
  `Hono request with observeRequests (tracing off): ${median(honoObserved).toFixed(2)} µs CPU; the layer adds ${median(honoDifferences).toFixed(2)} µs (quartiles ${quartiles(honoDifferences)})`,
);
console.log(`The fast lane's part of the layer (request id, clock reads, count): ${median(lane).toFixed(3)} µs CPU (quartiles ${quartiles(lane)})`);
console.log(
  `${rounds} rounds of ${calls} calls, interleaved; load average ${(await import('node:os'))
    .loadavg()
    .map((n) => n.toFixed(1))
    .join(' ')}`,
);
