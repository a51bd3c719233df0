import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HeldAnswers } from './hold-child.ts';
import type { LoadOptions } from './load.ts';
import { hasBody, loadRequestBytes, newRunId, type PacedResult, runPacedInChild } from './paced.ts';
import { ROOT, tempDir } from './processes.ts';
import { requestBytes } from './raw-http.ts';

const SOURCE = join(ROOT, 'bench/native/loadgen.c');

let built: string | null | undefined;

/**
 * The C load generator (bench/native/loadgen.c), compiled once with the machine's C compiler into
 * the system temp folder (named by the source's hash, so an edited source is rebuilt). `null`, with
 * the reason in `nativeLoadgenMissing`, when there is no compiler: the benchmark then measures with
 * the Node generators and says so.
 */
export function nativeLoadgen(): string | null {
  if (built !== undefined) return built;
  const source = readFileSync(SOURCE);
  const binary = join(tmpdir(), `cp-bench-loadgen-${createHash('sha256').update(source).digest('hex').slice(0, 16)}`);
  if (!existsSync(binary)) {
    try {
      // Built under a name of its own and renamed: two processes building at once never run a half-written file.
      const partial = `${binary}.${process.pid}`;
      execFileSync(process.env.CC ?? 'cc', ['-O2', '-o', partial, SOURCE], { stdio: ['ignore', 'ignore', 'pipe'] });
      renameSync(partial, binary);
    } catch (error) {
      nativeLoadgenMissing = `no C load generator (${process.env.CC ?? 'cc'} failed: ${
        String((error as { stderr?: Buffer }).stderr ?? error)
          .trim()
          .split('\n')[0]
      })`;
      return (built = null);
    }
  }
  return (built = binary);
}

export let nativeLoadgenMissing = '';

/** Requests as the C generator reads them: [u32 little-endian length][bytes], used in turn. */
function requestsFile(requests: Buffer[]): string {
  const path = join(tempDir('cp-bench-requests-'), 'requests.bin');
  const parts: Buffer[] = [];
  for (const bytes of requests) {
    const length = Buffer.alloc(4);
    length.writeUInt32LE(bytes.length);
    parts.push(length, bytes);
  }
  writeFileSync(path, Buffer.concat(parts));
  return path;
}

/** Runs the C generator and answers the JSON object it prints last; `onLine` sees every other line. */
function runLoadgen(args: string[], onLine: (line: string) => void = () => undefined): Promise<unknown> {
  const binary = nativeLoadgen();
  if (!binary) throw new Error(nativeLoadgenMissing);
  return new Promise((resolve, reject) => {
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let pending = '';
    let result: unknown;
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => {
      pending += chunk;
      let newline: number;
      while ((newline = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        if (line.startsWith('{')) result = JSON.parse(line);
        else onLine(line);
      }
    });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 && result !== undefined ? resolve(result) : reject(new Error(`loadgen ${args[0]} exited with ${code}`))));
  });
}

/**
 * `runPaced` (bench/lib/paced.ts), the same schedule and the same figures, by the C generator:
 * request k due at start + k / rate, its latency counted from then, the first `warmupSeconds` (1)
 * not counted. Requests with a body are prepared here, one per request sent (`{{unique}}` made
 * unique), so the generator only writes bytes.
 */
export async function runPacedNative(url: string, options: LoadOptions & { rate: number; warmupSeconds?: number }): Promise<PacedResult> {
  const target = new URL(url);
  const warmupSeconds = options.warmupSeconds ?? 1;
  const runId = newRunId();
  // As the generator counts them: warm-up, measured, and one more per connection to open it.
  const total = Math.max(1, Math.round(options.rate * options.seconds)) + Math.round(options.rate * warmupSeconds) + options.connections;
  const count = options.requests.some(hasBody) ? total : options.requests.length;
  const requests = Array.from({ length: count }, (_, k) => loadRequestBytes(target.host, options.requests[k % options.requests.length]!, runId, k));
  const file = requestsFile(requests);
  const args = ['paced', target.hostname, target.port, String(options.rate), String(options.seconds), String(warmupSeconds), String(options.connections), file];
  return (await runLoadgen(args)) as PacedResult;
}

/** A paced run by the C generator where it builds, else by the Node one (`runPacedInChild`): the same schedule and figures. */
export function runPaced(url: string, options: LoadOptions & { rate: number; warmupSeconds?: number }): Promise<PacedResult> {
  return nativeLoadgen() ? runPacedNative(url, options) : runPacedInChild(url, options);
}

/** `holdInChild` (bench/lib/hold-child.ts) by the C generator: the same answers, read off epoll. */
export function holdNative(url: string, headers: Record<string, string>, count: number): { connected: Promise<void>; answers: Promise<HeldAnswers> } {
  const target = new URL(url);
  const file = requestsFile([requestBytes(target.host, { method: 'GET', path: target.pathname + target.search, headers })]);
  let connected!: () => void;
  let failed!: (error: unknown) => void;
  const connectedPromise = new Promise<void>((resolve, reject) => ((connected = resolve), (failed = reject)));
  const answers = runLoadgen(['hold', target.hostname, target.port, String(count), file], (line) => {
    if (line === 'connected') connected();
  }) as Promise<HeldAnswers>;
  // A holder that fails before it is connected (a refused connection) fails the wait for it too.
  answers.catch(failed);
  return { connected: connectedPromise, answers };
}

/** How late a process of the C generator wakes from 200 µs sleeps (ms), with nothing else to do: the machine's scheduling hiccups. */
export type MachineJitter = { wakeups: number; p50Ms: number; p99Ms: number; maxMs: number; over2MsPerSecond: number };

export async function machineJitter(seconds: number): Promise<MachineJitter> {
  return (await runLoadgen(['jitter', String(seconds)])) as MachineJitter;
}
