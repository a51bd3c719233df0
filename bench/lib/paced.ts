import { fork } from 'node:child_process';
import { Agent, request } from 'node:http';
import type { LoadOptions, LoadRequest, LoadResult } from './load.ts';

export type PacedResult = LoadResult & {
  /** How far behind schedule the generator sent a request, at worst and at the 99th percentile (ms). */
  lateMs: number;
  lateP99Ms: number;
  /**
   * The 99th percentile counted from when each request was actually sent: the server's share when
   * the generator fell behind (it leaves out the generator's lateness, and with it the coordinated
   * omission that lateness could hide; read it beside `p99`, never instead of it).
   */
  p99FromSendMs: number;
  targetRate: number;
};

/**
 * An open-loop run that is really paced: request k is due at `start + k / rate` and is sent then,
 * whatever the answers to earlier ones. autocannon's `overallRate` sends each second's quota back
 * to back and then idles, so its "open loop" p99 was the saturated p99; here the gaps are even
 * (to the event loop's timer granularity, ~1 ms).
 *
 * Latency is measured from the moment a request was *due*, not from when a socket took it: a
 * request that waits for a free connection because the server is slow counts that wait (no
 * coordinated omission). `lateMs` reports how far behind schedule the generator itself fell, so a
 * run where the load generator, not the server, was the bottleneck can be told apart.
 */
export async function runPaced(url: string, options: LoadOptions & { rate: number }): Promise<PacedResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections });
  const target = new URL(url);
  const total = Math.max(1, Math.round(options.rate * options.seconds));
  // Unique across runs and processes, and fit for a deployment name (lower-case letters, digits, dashes).
  const runId = `${process.pid.toString(36)}-${Date.now().toString(36)}`;
  const latencies = new Float64Array(total);
  const lateness = new Float64Array(total);
  const fromSend = new Float64Array(total);
  let done = 0;
  let failures = 0;
  let lateMs = 0;

  const fire = (k: number, due: number) =>
    new Promise<void>((resolve) => {
      const sent = performance.now();
      const spec = options.requests[k % options.requests.length]!;
      const body = spec.body?.() ?? spec.bodyTemplate?.replaceAll('{{unique}}', `${runId}-${k.toString(36)}`);
      const req = request(
        {
          host: target.hostname,
          port: target.port,
          path: spec.path,
          method: spec.method,
          agent,
          headers: { ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}), ...spec.headers },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            const status = res.statusCode ?? 0;
            if ((status >= 200 && status < 300) || status === 304) {
              const end = performance.now();
              latencies[k] = end - due;
              fromSend[k] = end - sent;
            }
            else {
              latencies[k] = Number.NaN;
              failures += 1;
            }
            done += 1;
            resolve();
          });
        },
      );
      req.on('error', () => {
        latencies[k] = Number.NaN;
        failures += 1;
        done += 1;
        resolve();
      });
      req.end(body);
    });

  // Open the connections before the clock starts, so the first requests do not pay for connects.
  await Promise.all(Array.from({ length: options.connections }, (_, k) => fire(k, performance.now())));
  done = 0;
  failures = 0;

  const interval = 1000 / options.rate;
  const start = performance.now() + 5;
  const pending: Array<Promise<void>> = [];
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (next < total) {
        const due = start + next * interval;
        if (due > now) break;
        const late = performance.now() - due;
        lateness[next] = late;
        lateMs = Math.max(lateMs, late);
        pending.push(fire(next, due));
        next += 1;
      }
      if (next >= total) return resolve();
      setTimeout(tick, Math.max(0, start + next * interval - performance.now()));
    };
    setTimeout(tick, 5);
  });
  const sendEnded = performance.now();
  await Promise.all(pending);
  agent.destroy();

  const lateSorted = Array.from(lateness).sort((a, b) => a - b);
  const ok = Array.from(latencies).filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  const at = (q: number) => (ok.length ? ok[Math.min(ok.length - 1, Math.floor(q * ok.length))]! : Number.NaN);
  return {
    rps: total / ((sendEnded - start) / 1000),
    targetRate: options.rate,
    p50: at(0.5),
    p99: at(0.99),
    max: ok.length ? ok[ok.length - 1]! : Number.NaN,
    requests: total,
    failures,
    lateMs,
    lateP99Ms: lateSorted[Math.min(total - 1, Math.floor(0.99 * total))] ?? 0,
    p99FromSendMs: quantile(Array.from(fromSend).filter((v, k) => !Number.isNaN(latencies[k]!)), 0.99),
  };
}

function quantile(values: number[], q: number): number {
  const sorted = values.sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : Number.NaN;
}

/**
 * `runPaced` in a child process of its own: the generator must not share an event loop (or a
 * garbage collector) with anything else, or its own pauses show up as the server's latency. The
 * bench process runs autocannon and keeps every earlier run's figures; in the previous runs the
 * generator fell up to 30 ms behind schedule there. Requests cross as data: `body` functions are
 * dropped, so a request with a body must carry a `bodyTemplate`.
 */
export function runPacedInChild(url: string, options: LoadOptions & { rate: number }): Promise<PacedResult> {
  const requests: LoadRequest[] = options.requests.map(({ body: _dropped, ...rest }) => {
    if (_dropped && rest.bodyTemplate === undefined) throw new Error(`${rest.method} ${rest.path}: a paced request with a body needs a bodyTemplate`);
    return rest;
  });
  return new Promise((resolve, reject) => {
    // 'advanced' serialization keeps NaN (a run without one good answer) as NaN, where JSON makes it null.
    const child = fork(import.meta.filename, ['--paced-child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' });
    let result: PacedResult | undefined;
    child.once('message', (message) => (result = message as PacedResult));
    child.once('error', reject);
    child.once('exit', (code) => (result ? resolve(result) : reject(new Error(`the paced generator exited with ${code} and no result`))));
    child.send({ url, options: { ...options, requests } });
  });
}

if (process.argv.includes('--paced-child') && process.send) {
  process.once('message', (message) => {
    const { url, options } = message as { url: string; options: LoadOptions & { rate: number } };
    runPaced(url, options).then(
      (result) => process.send!(result, () => process.exit(0)),
      (error: unknown) => {
        process.stderr.write(`paced generator: ${String(error)}\n`);
        process.exit(1);
      },
    );
  });
}
