import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');

export type Child = {
  url: string;
  port: number;
  pid: number;
  /** ms from spawn to the "listening" log line. */
  startMs: number;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
};

const created: string[] = [];

/** A fresh temporary directory for one benchmark's files; `removeTempDirs` deletes them all. */
export function tempDir(prefix = 'cp-bench-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  created.push(dir);
  return dir;
}

/** Deletes the directories `tempDir` made (the 100k-deployment database is ~700 MB). */
export function removeTempDirs(): void {
  for (const dir of created.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * Starts `script` (relative to the repository) with the Node that runs the benchmark and waits for
 * its JSON `"msg":"listening"` line with the port, which the server and both baselines print.
 */
export async function startChild(script: string, env: Record<string, string>): Promise<Child> {
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, [join(ROOT, script)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const port = await new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start in time:\n${output}`)), 60_000);
    const onData = () => {
      const match = /"msg":"listening".*?"port":(\d+)/.exec(output);
      if (!match) return;
      clearTimeout(timer);
      child.stderr!.off('data', onData);
      resolvePort(Number(match[1]));
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${code} before listening:\n${output}`));
    });
  });
  const startMs = performance.now() - started;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    startMs,
    output: () => output,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** Resident memory of a process in bytes, from /proc/<pid>/status (Linux). */
export function rssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
