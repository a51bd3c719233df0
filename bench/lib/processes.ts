import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ListeningChild, ROOT, startListeningChild } from '../../test/helpers/listening-child.ts';

export { ROOT };

export type Child = ListeningChild;

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

/** Starts a server script and waits for its "listening" line (shared with the tests). */
export const startChild = (script: string, env: Record<string, string>, nodeArgs: readonly string[] = []): Promise<Child> =>
  startListeningChild(script, env, 60_000, nodeArgs);

const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim());

/** CPU time a process has used so far, user and system (ms), from /proc/<pid>/stat (Linux; clock-tick resolution). */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1000;
}

/**
 * CPU time the threads of a live process have used so far (ms), from each one's
 * /proc/<pid>/task/<tid>/schedstat, in nanoseconds: `cpuMs` counts clock ticks of 10 ms, which
 * reads a start of ~150 ms CPU to ±7%. A thread that has ended is not counted (Node's own threads
 * live as long as the process).
 */
export function threadsCpuMs(pid: number): number {
  let nanoseconds = 0;
  for (const thread of readdirSync(`/proc/${pid}/task`)) {
    try {
      nanoseconds += Number(readFileSync(`/proc/${pid}/task/${thread}/schedstat`, 'utf8').split(' ')[0]);
    } catch {
      // Ended between the listing and the read.
    }
  }
  return nanoseconds / 1e6;
}

/** The parent of process `pid` (Linux, /proc). */
export function parentPid(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
}

/**
 * CPU a process and its children have used (ms): its own, what its ended children left it (the
 * children's user and system time it waited for), and its live children's. PostgreSQL's backends
 * end when a pool closes an idle connection; their CPU stays counted.
 */
export function treeCpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  let total = (ticks / ticksPerSecond) * 1000;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (parentPid(Number(entry)) === pid) total += cpuMs(Number(entry));
    } catch {
      // Ended between the listing and the read: its time is now in the parent's.
    }
  }
  return total;
}

/** Resident memory of a process in bytes, from /proc/<pid>/status (Linux). */
export function rssBytes(pid: number): number {
  const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(match[1]) * 1024;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
