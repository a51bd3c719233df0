import { fork } from 'node:child_process';
import type { LoadOptions, LoadRequest, LoadResult } from './load.ts';
import { RawConnection, requestBytes } from './raw-http.ts';

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
  /**
   * The longest time no answer came back while requests were outstanding, and when it began (ms
   * after the start): a pause of the server (or of the machine) shows here, and at half of max
   * it leaves a backlog that takes as long again to drain, which is what a p99 far above the
   * p99 from send means.
   */
  longestSilenceMs: number;
  longestSilenceAtMs: number;
  /** Connections the server closed and the C generator reopened (its idle keep-alive timeout): bench/native/loadgen.c. */
  reconnects?: number;
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
 *
 * Requests go over `RawConnection`s (prepared bytes on plain keep-alive sockets, one request in
 * flight per connection): with node:http's client the generator could not hold 10,000 requests a
 * second on two cores, and the paced p99 measured its queue (the bare baseline's own was 239 ms).
 *
 * The first `warmupSeconds` (default 1) are sent at the same pace and not counted: the generator
 * process has just started (its first requests run unoptimized code, and it competes with itself
 * for the two cores), and a stall in its first 200 ms showed in the paced p99 of the servers and of
 * the bare baselines alike.
 */
export async function runPaced(url: string, options: LoadOptions & { rate: number; warmupSeconds?: number }): Promise<PacedResult> {
  const target = new URL(url);
  const host = target.host;
  const measured = Math.max(1, Math.round(options.rate * options.seconds));
  const warmup = Math.round(options.rate * (options.warmupSeconds ?? 1));
  const total = warmup + measured;
  const runId = newRunId();
  const latencies = new Float64Array(total);
  const lateness = new Float64Array(total);
  const fromSend = new Float64Array(total);
  let failures = 0;
  let lateMs = 0;

  // Requests without a body are the same bytes every time: prepared once.
  const fixed = options.requests.map((spec) => (hasBody(spec) ? null : loadRequestBytes(host, spec, runId, 0)));
  const bytesOf = (k: number): Buffer => fixed[k % options.requests.length] ?? loadRequestBytes(host, options.requests[k % options.requests.length]!, runId, k);

  const connections = Array.from({ length: options.connections }, () => new RawConnection(target.hostname, Number(target.port)));
  const idle: RawConnection[] = [];
  /** Requests that are due while every connection is busy: sent as connections free up, their wait counted. */
  const backlog: Array<{ k: number; due: number }> = [];
  let answered = 0;
  let lastAnswer = 0;
  let longestSilenceMs = 0;
  let longestSilenceAtMs = 0;
  let allAnswered: () => void = () => undefined;

  const send = (connection: RawConnection, k: number, due: number) => {
    const sent = performance.now();
    connection.send(bytesOf(k), (status) => {
      const end = performance.now();
      if (lastAnswer >= measuredStart && end - lastAnswer > longestSilenceMs) {
        longestSilenceMs = end - lastAnswer;
        longestSilenceAtMs = lastAnswer - measuredStart;
      }
      lastAnswer = end;
      if ((status >= 200 && status < 300) || status === 304) {
        latencies[k] = end - due;
        fromSend[k] = end - sent;
      } else {
        latencies[k] = Number.NaN;
        if (k >= warmup) failures += 1;
      }
      answered += 1;
      const waiting = backlog.shift();
      if (waiting) send(connection, waiting.k, waiting.due);
      else idle.push(connection);
      if (answered === total) allAnswered();
    });
  };

  // Open the connections (one request each) before the clock starts, so the first requests do not pay for connects.
  await Promise.all(connections.map((connection, k) => new Promise<void>((resolve) => connection.send(bytesOf(total + k), () => resolve()))));
  idle.push(...connections);

  const interval = 1000 / options.rate;
  const start = performance.now() + 5;
  const measuredStart = start + warmup * interval;
  lastAnswer = 0;
  let next = 0;
  const finished = new Promise<void>((resolve) => (allAnswered = resolve));
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (next < total) {
        const due = start + next * interval;
        if (due > now) break;
        const late = now - due;
        lateness[next] = late;
        if (next >= warmup) lateMs = Math.max(lateMs, late);
        const connection = idle.pop();
        if (connection) send(connection, next, due);
        else backlog.push({ k: next, due });
        next += 1;
      }
      if (next >= total) return resolve();
      setTimeout(tick, Math.max(0, start + next * interval - performance.now()));
    };
    setTimeout(tick, 5);
  });
  const sendEnded = performance.now();
  await finished;
  for (const connection of connections) connection.close();

  const lateSorted = Array.from(lateness.subarray(warmup)).sort((a, b) => a - b);
  const counted = latencies.subarray(warmup);
  const ok = Array.from(counted)
    .filter((v) => !Number.isNaN(v))
    .sort((a, b) => a - b);
  const at = (q: number) => (ok.length ? ok[Math.min(ok.length - 1, Math.floor(q * ok.length))]! : Number.NaN);
  return {
    rps: measured / ((sendEnded - measuredStart) / 1000),
    targetRate: options.rate,
    p50: at(0.5),
    p99: at(0.99),
    max: ok.length ? ok[ok.length - 1]! : Number.NaN,
    requests: measured,
    failures,
    lateMs,
    longestSilenceMs,
    longestSilenceAtMs,
    lateP99Ms: lateSorted[Math.min(measured - 1, Math.floor(0.99 * measured))] ?? 0,
    p99FromSendMs: quantile(
      Array.from(fromSend.subarray(warmup)).filter((_v, k) => !Number.isNaN(counted[k]!)),
      0.99,
    ),
  };
}

/** Unique across runs and processes, and fit for a deployment name (lower-case letters, digits, dashes). */
export const newRunId = (): string => `${process.pid.toString(36)}-${Date.now().toString(36)}`;

export const hasBody = (spec: LoadRequest): boolean => spec.body !== undefined || spec.bodyTemplate !== undefined;

/**
 * The bytes of request k sent as `spec`: without a body, always the same; with one, a fresh body
 * (the body function, else the template with `{{unique}}` made unique by the run and k).
 */
export function loadRequestBytes(host: string, spec: LoadRequest, runId: string, k: number): Buffer {
  if (!hasBody(spec)) return requestBytes(host, { method: spec.method, path: spec.path, headers: spec.headers ?? {} });
  const body = spec.body?.() ?? spec.bodyTemplate!.replaceAll('{{unique}}', `${runId}-${k.toString(36)}`);
  return requestBytes(host, { method: spec.method, path: spec.path, headers: { 'content-type': 'application/json', ...spec.headers }, body });
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
