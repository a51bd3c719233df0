/**
 * `node bench/http-metrics-cost.ts [--rounds=15] [--calls=100000]`: the CPU time of counting one
 * HTTP answer, as every request does (`Metrics.httpAnswered`), against prom-client's own `Counter.inc`
 * and `Histogram.observe` with the same labels and buckets (what `httpAnswered` called until the
 * answers were counted in plain numbers: docs/decisions/http-metrics-counting.md). In one process,
 * the two taking turns going first, round by round; CPU time (`process.cpuUsage`), not wall time,
 * and the ratio of each round's pair, which holds better than either figure on a shared machine.
 */
import { loadavg } from 'node:os';
import { Counter, Histogram, Registry } from 'prom-client';
import { Metrics } from '../server/metrics.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const rounds = Number(arg('rounds') ?? 15);
const calls = Number(arg('calls') ?? 100_000);
const ROUTE = '/v2/deployments/:deployment_id/revisions/:revision_id';

const metrics = new Metrics({ githubOutboxPending: async () => 0, agentHeartbeats: async () => [], workPending: async () => [] });
const registry = new Registry();
const counter = new Counter({ name: 'c', help: 'c', labelNames: ['method', 'route', 'status'], registers: [registry] });
const histogram = new Histogram({
  name: 'h',
  help: 'h',
  labelNames: ['method', 'route'],
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});
const ours = (i: number) => metrics.httpAnswered('GET', ROUTE, i % 8 === 0 ? 304 : 200, 0.0004);
const promClient = (i: number) => {
  counter.inc({ method: 'GET', route: ROUTE, status: String(i % 8 === 0 ? 304 : 200) });
  histogram.observe({ method: 'GET', route: ROUTE }, 0.0004);
};

/** CPU nanoseconds per call of `work`. */
function cpuPerCall(work: (i: number) => void): number {
  const started = process.cpuUsage();
  for (let i = 0; i < calls; i++) work(i);
  const used = process.cpuUsage(started);
  return ((used.user + used.system) * 1000) / calls;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const quartiles = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return `${sorted[Math.floor(sorted.length / 4)]!.toFixed(3)}–${sorted[Math.floor((3 * sorted.length) / 4)]!.toFixed(3)}`;
};
cpuPerCall(ours);
cpuPerCall(promClient);
const oursNs: number[] = [];
const promNs: number[] = [];
for (let round = 0; round < rounds; round++) {
  if (round % 2 === 0) {
    oursNs.push(cpuPerCall(ours));
    promNs.push(cpuPerCall(promClient));
  } else {
    promNs.push(cpuPerCall(promClient));
    oursNs.push(cpuPerCall(ours));
  }
}
const ratios = oursNs.map((n, i) => n / promNs[i]!);
console.log(
  `${rounds} rounds of ${calls} calls; CPU ns per answer counted (median over rounds); load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
console.log(`Metrics.httpAnswered ${median(oursNs).toFixed(0)} ns; prom-client Counter.inc + Histogram.observe ${median(promNs).toFixed(0)} ns`);
console.log(`ours / prom-client: ${median(ratios).toFixed(3)} (quartiles ${quartiles(ratios)})`);
