import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { CgroupHost } from './cgroups.ts';

const run = promisify(execFile);

/**
 * What every sandboxed command may use (contract §15; docs/decisions/local-agent-limits.md): the
 * cgroups they are limited with, a server's memory (MiB, unless the revision's `resource_spec`
 * sets `memory_limit_mb`) and an install's or build's, processes, CPU cores (unless
 * `resource_spec.cpu_limit`), each tmpfs's size, the disk its checkout and cache may fill, and how
 * long install and build may take together.
 */
export type AgentLimits = {
  cgroups: CgroupHost;
  memoryMb: number;
  buildMemoryMb: number;
  pidsMax: number;
  cpus: number;
  tmpMb: number;
  diskMb: number;
  buildTimeoutSeconds: number;
};

export const LIMITS_NONE_WARNING =
  'WARNING: --limits none: installs, builds and agent servers may use all of this machine’s memory, processes, CPU and disk; one deployment can take the machine down for every other.';

/** Bytes the folders hold on disk (`du`, links not followed); 0 for folders that do not exist. */
export async function diskUsage(paths: string[]): Promise<number> {
  try {
    const { stdout } = await run('du', ['-s', '-c', '-B1', ...paths], { maxBuffer: 1024 * 1024 });
    const total = stdout.trim().split('\n').pop() ?? '';
    return Number(total.split(/\s/)[0]) || 0;
  } catch (error) {
    // du exits non-zero when a path vanished meanwhile; its output still has the total.
    const stdout = (error as { stdout?: string }).stdout ?? '';
    return Number(stdout.trim().split('\n').pop()?.split(/\s/)[0]) || 0;
  }
}

/** SIGXFSZ: a process wrote past the largest file it may write (the disk cap, set with prlimit). */
const FILE_SIZE_SIGNAL_EXIT = 128 + 25;

/**
 * The space limit a failed command ran into, from how it ended: killed for writing a file past the
 * disk cap, or out of room on a sized tmpfs (its output says ENOSPC); null when neither.
 */
export function spaceLimit(result: { code: number | null; signal: string | null; lastLines: string[] }, limits: AgentLimits): string | null {
  if (result.signal === 'SIGXFSZ' || result.code === FILE_SIZE_SIGNAL_EXIT || result.lastLines.some((line) => /File size limit exceeded|EFBIG/.test(line)))
    return `disk limit of ${limits.diskMb} MiB reached (a file as large as the whole cap)`;
  if (result.lastLines.some((line) => /ENOSPC|No space left on device/.test(line))) return `/tmp size limit of ${limits.tmpMb} MiB reached`;
  return null;
}
