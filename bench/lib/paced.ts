import { Agent, request } from 'node:http';
import type { LoadOptions, LoadResult } from './load.ts';

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
export async function runPaced(url: string, options: LoadOptions & { rate: number }): Promise<LoadResult & { lateMs: number; targetRate: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.connections });
  const target = new URL(url);
  const total = Math.max(1, Math.round(options.rate * options.seconds));
  const latencies = new Float64Array(total);
  let done = 0;
  let failures = 0;
  let lateMs = 0;

  const fire = (k: number, due: number) =>
    new Promise<void>((resolve) => {
      const spec = options.requests[k % options.requests.length]!;
      const body = spec.body?.();
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
            if ((status >= 200 && status < 300) || status === 304) latencies[k] = performance.now() - due;
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
        lateMs = Math.max(lateMs, now - due);
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
  };
}
