import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join, resolve } from 'node:path';
import { type Child, ROOT, removeTempDirs, sleep, startChild, tempDir } from './lib/processes.ts';

/**
 * `npm run bench:hardening [-- --root=<checkout>] [--only=memory,slowloris] [--connections=20000]`:
 * the two exhaustion attacks the hardening tests defend against, run against the real server (`server/main.ts` of this
 * checkout, or of another one given by `--root`, e.g. an export of main for a before/after).
 * All traffic is on loopback, bounded in count and time. Not part of `npm test`.
 *
 * 1. memory: 100 concurrent unsigned (wrong-signature) 25 MB webhook posts; the server's peak RSS
 *    (VmHWM from /proc) over its RSS before, and what the posts were answered.
 * 2. slowloris: 20,000 idle connections opened to the main port and held (by two child processes
 *    of 10,000: this machine's hard file limit is 20,000 per process and cannot be raised here),
 *    while /healthz is asked 10 times a second on the health port (and on the main port); success
 *    counts and latencies, and how long until the main port answers again.
 */

const POSTS = 100;
const BODY_BYTES = 25 * 1024 * 1024;
const WEBHOOK_SECRET = 'bench-hardening-secret';
const API_KEY = `bench-key-${crypto.randomUUID()}`;

const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);

/** Resident memory now (VmRSS) or at its highest so far (VmHWM), from /proc (Linux). */
function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`${field}:\\s+(\\d+)\\s+kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) * 1024 : NaN;
}

const mb = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MB`;

async function startServer(root: string, env: Record<string, string>): Promise<Child> {
  // info: the listening line, which names the ports, is an info line.
  return startChild(resolve(root, 'server/main.ts'), {
    DATABASE_URL: join(tempDir(), 'control-plane.db'),
    BOOTSTRAP_API_KEY: API_KEY,
    LOG_LEVEL: 'info',
    RECONCILE_INTERVAL_MS: '0',
    ...env,
  });
}

/** One wrong-signature post of the shared 25 MB body; the status, or the error that ended it. */
function unsignedPost(port: number, body: Buffer, index: number): Promise<number | string> {
  return new Promise((done) => {
    const req = request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/v1/webhooks/github',
      agent: false,
      headers: {
        'content-type': 'application/json',
        'content-length': String(body.length),
        'x-hub-signature-256': `sha256=${'0'.repeat(64)}`,
        'x-github-event': 'push',
        'x-github-delivery': `bench-${index}-${crypto.randomUUID()}`,
      },
    });
    let settled = false;
    const finish = (result: number | string) => {
      if (settled) return;
      settled = true;
      done(result);
    };
    req.setTimeout(120_000, () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => finish(res.statusCode!));
      res.on('error', () => finish(res.statusCode!));
    });
    req.on('error', (error: NodeJS.ErrnoException) => finish(error.code ?? error.message));
    req.end(body);
  });
}

async function memory(root: string): Promise<void> {
  log(`memory: ${POSTS} concurrent unsigned ${mb(BODY_BYTES)} webhook posts against ${root}`);
  const server = await startServer(root, { GITHUB_WEBHOOK_SECRET: WEBHOOK_SECRET });
  try {
    await fetch(`${server.url}/healthz`);
    await sleep(1000);
    const before = procStatus(server.pid, 'VmRSS');
    const hwmBefore = procStatus(server.pid, 'VmHWM');
    const body = Buffer.alloc(BODY_BYTES, 0x20);
    let peakSampled = before;
    const sampler = setInterval(() => {
      const rss = procStatus(server.pid, 'VmRSS');
      if (rss > peakSampled) peakSampled = rss;
    }, 20);
    const started = performance.now();
    const results = await Promise.all(Array.from({ length: POSTS }, (_, i) => unsignedPost(server.port, body, i)));
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    const peak = Math.max(procStatus(server.pid, 'VmHWM'), peakSampled);
    const counts = new Map<string, number>();
    for (const result of results) counts.set(String(result), (counts.get(String(result)) ?? 0) + 1);
    await sleep(2000);
    const after = procStatus(server.pid, 'VmRSS');
    const alive = await fetch(`${server.url}/healthz`).then(
      (r) => r.status,
      (e: Error) => e.message,
    );
    log(
      `memory: RSS before ${mb(before)} (high-water ${mb(hwmBefore)}), peak ${mb(peak)} (+${mb(peak - before)}), 2 s after ${mb(after)}; ` +
        `answers ${JSON.stringify(Object.fromEntries(counts))} in ${seconds.toFixed(1)} s; /healthz after: ${alive}`,
    );
  } finally {
    await server.stop();
  }
}

/** A child process of this script that opens and holds `count` idle connections (mode `--hold`). */
type Holder = { opened: Promise<number>; open(): number; stop(): void };

function startHolder(port: number, count: number, firstAddress: number): Holder {
  const child = spawn(process.execPath, [import.meta.filename, '--hold', String(port), String(count), String(firstAddress)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let buffer = '';
  let open = 0;
  let openedResolve!: (n: number) => void;
  const opened = new Promise<number>((r) => (openedResolve = r));
  child.once('exit', (code) => {
    log(`slowloris: a holder exited (${code})`);
    openedResolve(0);
  });
  child.stdout!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = JSON.parse(buffer.slice(0, newline)) as { opened?: number; open: number };
      buffer = buffer.slice(newline + 1);
      open = line.open;
      if (line.opened !== undefined) openedResolve(line.opened);
    }
  });
  return { opened, open: () => open, stop: () => child.kill('SIGTERM') };
}

/** `--hold <port> <count> <first address>`: the holder's side; reports how many are open every 250 ms. */
async function hold(port: number, count: number, firstAddress: number): Promise<void> {
  const sockets = new Set<Socket>();
  let opened = 0;
  const report = (extra: Record<string, number> = {}) => process.stdout.write(`${JSON.stringify({ ...extra, open: sockets.size })}\n`);
  setInterval(report, 250);
  process.on('SIGTERM', () => process.exit(0));
  const openOne = (i: number) =>
    new Promise<void>((done) => {
      // Source addresses spread over 127.0.0.x, so 20,000 connections do not run out of ephemeral ports.
      const socket = connect({ host: '127.0.0.1', port, localAddress: `127.0.0.${firstAddress + (i % 8)}` });
      socket.on('error', () => undefined);
      socket.once('connect', () => {
        opened += 1;
        sockets.add(socket);
        done();
      });
      socket.once('close', () => {
        sockets.delete(socket);
        done();
      });
    });
  // In batches: a burst larger than the listen backlog would wait on SYN retransmits (seconds each).
  for (let i = 0; i < count; i += 200) await Promise.all(Array.from({ length: Math.min(200, count - i) }, (_, j) => openOne(i + j)));
  report({ opened });
}

function probe(port: number): Promise<{ ok: boolean; ms: number }> {
  const started = performance.now();
  return new Promise((done) => {
    const req = request({ host: '127.0.0.1', port, path: '/healthz', agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => done({ ok: res.statusCode === 200, ms: performance.now() - started }));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => done({ ok: false, ms: performance.now() - started }));
    req.end();
  });
}

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
};

function summary(name: string, results: Array<{ ok: boolean; ms: number }>): string {
  const ok = results.filter((r) => r.ok).map((r) => r.ms);
  return `${name}: ${ok.length}/${results.length} answered 200; p50 ${percentile(ok, 50).toFixed(1)} ms, p99 ${percentile(ok, 99).toFixed(1)} ms, max ${(ok.length ? Math.max(...ok) : NaN).toFixed(1)} ms`;
}

async function slowloris(root: string, connections: number): Promise<void> {
  log(`slowloris: ${connections} idle connections held against ${root}`);
  const server = await startServer(root, { HEALTH_PORT: '0' });
  const listening = server
    .output()
    .split('\n')
    .find((line) => line.includes('"msg":"listening"'));
  const healthPort = listening ? (JSON.parse(listening) as { health_port?: number }).health_port : undefined;
  log(`slowloris: main port ${server.port}, health port ${healthPort ?? 'none (this server has no HEALTH_PORT)'}`);
  const holders: Holder[] = [];
  try {
    const started = performance.now();
    const half = Math.ceil(connections / 2);
    holders.push(startHolder(server.port, half, 2), startHolder(server.port, connections - half, 10));
    const health: Array<{ ok: boolean; ms: number; at: number }> = [];
    const main: Array<{ ok: boolean; ms: number; at: number }> = [];
    let probing = true;
    const probes = (async () => {
      while (probing) {
        const at = (performance.now() - started) / 1000;
        const round = [probe(server.port).then((r) => main.push({ ...r, at }))];
        if (healthPort) round.push(probe(healthPort).then((r) => health.push({ ...r, at })));
        await Promise.all([...round, sleep(100)]);
      }
    })();
    const opened = (await Promise.all(holders.map((h) => h.opened))).reduce((a, b) => a + b, 0);
    const openedMs = performance.now() - started;
    const held = () => holders.reduce((sum, h) => sum + h.open(), 0);
    const heldNow = held();
    log(`slowloris: ${opened} of ${connections} connections were accepted in ${(openedMs / 1000).toFixed(1)} s; ${heldNow} still open right after`);
    // Keep probing for 15 s (the server's default header timeout is 10 s), counting what is still held.
    for (const at of [5000, 10_000, 15_000]) {
      await sleep(Math.max(0, at - (performance.now() - started - openedMs)));
      log(`slowloris: ${held()} still open ${((performance.now() - started) / 1000).toFixed(1)} s after the attack began`);
    }
    probing = false;
    await probes;
    if (healthPort) log(`slowloris: ${summary('health port /healthz during the attack', health)}`);
    log(`slowloris: ${summary('main port /healthz during the attack', main)}`);
    const failures = main.filter((r) => !r.ok);
    if (failures.length === 0) log('slowloris: the main port never failed a probe');
    else log(`slowloris: main port probes failed from ${failures[0]!.at.toFixed(1)} s to ${failures.at(-1)!.at.toFixed(1)} s after the attack began`);
    // When the last probe failed: how long until the main port answers again.
    if (main.at(-1) && !main.at(-1)!.ok) {
      let recovered = NaN;
      while (performance.now() - started < 120_000) {
        if ((await probe(server.port)).ok) {
          recovered = (performance.now() - started) / 1000;
          break;
        }
        await sleep(100);
      }
      log(
        `slowloris: main port answered again ${Number.isNaN(recovered) ? 'not within 120 s' : `${recovered.toFixed(1)} s after the attack began`}; attacker's connections still open then: ${held()}`,
      );
    }
  } finally {
    for (const holder of holders) holder.stop();
    await server.stop();
  }
}

const argv = process.argv.slice(2);
if (argv[0] === '--hold') {
  await hold(Number(argv[1]), Number(argv[2]), Number(argv[3]));
} else {
  const root = resolve(argv.find((a) => a.startsWith('--root='))?.slice('--root='.length) ?? ROOT);
  const only = argv
    .find((a) => a.startsWith('--only='))
    ?.slice('--only='.length)
    .split(',');
  const connections = Number(argv.find((a) => a.startsWith('--connections='))?.slice('--connections='.length) ?? 20_000);
  try {
    if (!only || only.includes('memory')) await memory(root);
    if (!only || only.includes('slowloris')) await slowloris(root, connections);
  } finally {
    removeTempDirs();
  }
}
