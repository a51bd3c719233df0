import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { socketRootOf } from './socket-root.ts';
import type { Upstream } from './upstream.ts';

/**
 * The agent's own records about a build directory (that its build finished; which process serves
 * it) live in a directory beside it, `<build dir>.agent`, never inside the checked-out tree: a
 * repository or tarball that ships a file of the same name cannot pass for a finished build or
 * name a process for the agent to kill.
 */
export function stateDirOf(buildDir: string): string {
  return `${buildDir}.agent`;
}

const BUILT = 'built.json';

/**
 * The records are the agent's own (which processes it may stop): owner-only whatever the umask,
 * the folder 0700 and the file 0600, set explicitly because `mode` is only narrowed by the umask
 * and an existing file keeps its own.
 */
function writeRecord(buildDir: string, name: string, text: string): void {
  const dir = stateDirOf(buildDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const file = join(dir, name);
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600);
}
const SERVER = 'server.json';

/** Records that the build in `buildDir` finished: a restarted agent serves it without building again. */
export function markBuilt(buildDir: string, info: BuiltRecord): void {
  writeRecord(buildDir, BUILT, JSON.stringify(info));
}

/** What a finished build recorded: its commit, its graph config, and the stored packages it runs with (package-store.ts). */
export type BuiltRecord = { sha: string | null; graph_config_path: string; packages?: string | null };

export function builtRecord(buildDir: string): BuiltRecord | null {
  try {
    return JSON.parse(readFileSync(join(stateDirOf(buildDir), BUILT), 'utf8')) as BuiltRecord;
  } catch {
    return null;
  }
}

export function isBuilt(buildDir: string): boolean {
  return existsSync(join(stateDirOf(buildDir), BUILT)) && existsSync(buildDir);
}

/** Removes a build directory and the agent's records about it. */
export function removeBuild(buildDir: string): void {
  rmSync(buildDir, { recursive: true, force: true });
  rmSync(stateDirOf(buildDir), { recursive: true, force: true });
  rmSync(socketDirOf(buildDir), { recursive: true, force: true });
}

/**
 * The folder of a sandboxed server's socket, `<socket root>/.s/<revision id>` for `<work dir>/<deployment
 * id>/<revision id>`: outside the checkout (where the build could plant a link) and apart from the
 * agent's records (the sandbox sees this folder, bound, and nothing else of the agent's); under the
 * work directory, or a short folder standing for it when that is too long for a socket's path
 * (socket-root.ts).
 */
export function socketDirOf(buildDir: string): string {
  return join(socketRootOf(dirname(dirname(buildDir))), '.s', basename(buildDir));
}

/**
 * What identifies a running process beyond its pid, which the system reuses (after a reboot,
 * or once it ended): on Linux the boot and the process's start time in clock ticks since boot
 * (`/proc/<pid>/stat`, unchanged by `exec`), elsewhere the start time `ps` shows. Null when the
 * process does not exist or nothing can tell.
 */
export function processIdentity(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const startTicks = fields[19];
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return startTicks ? `linux:${boot}:${startTicks}` : null;
  } catch {
    // no /proc (macOS), or no such process
  }
  if (existsSync('/proc/self/stat')) return null;
  try {
    const started = execFileSync('ps', ['-o', 'lstart=', '-p', String(pid)], { encoding: 'utf8', timeout: 5000 }).trim();
    return started ? `ps:${started}` : null;
  } catch {
    return null;
  }
}

type ServerRecord = { pid: number; identity: string | null; port?: number; socketPath?: string };

/** Records the process group the agent started to serve `buildDir` (and where it answers), with what identifies it. */
export function recordServer(buildDir: string, pid: number, upstream?: Upstream): void {
  writeRecord(buildDir, SERVER, JSON.stringify({ pid, identity: processIdentity(pid), ...upstream } satisfies ServerRecord));
}

/** Forgets the record of `pid` (stopped); a record of another, newer server of the directory stays. */
export function forgetServer(buildDir: string, pid: number): void {
  const record = readServer(buildDir);
  if (record?.pid === pid) rmSync(join(stateDirOf(buildDir), SERVER), { force: true });
}

function readServer(buildDir: string): ServerRecord | null {
  try {
    const record = JSON.parse(readFileSync(join(stateDirOf(buildDir), SERVER), 'utf8')) as Partial<ServerRecord>;
    const port = Number.isInteger(record.port) ? record.port : undefined;
    const socketPath = typeof record.socketPath === 'string' ? record.socketPath : undefined;
    return Number.isInteger(record.pid) && (record.pid as number) > 1
      ? { pid: record.pid as number, identity: record.identity ?? null, port, socketPath }
      : null;
  } catch {
    return null;
  }
}

/**
 * The pid of the server a previous run of the agent started for `buildDir` and left running (it
 * was killed), when that process still runs and is still the one recorded; null otherwise (gone,
 * or the pid now names another process: after a reboot, or reused), so nothing unrelated is killed.
 */
export function orphanOf(buildDir: string): { pid: number; upstream?: Upstream } | { pid: number; stale: true } | null {
  const record = readServer(buildDir);
  if (!record) return null;
  const now = processIdentity(record.pid);
  if (now === null) return null;
  if (record.identity === null || now !== record.identity) return { pid: record.pid, stale: true };
  const upstream = record.socketPath !== undefined ? { socketPath: record.socketPath } : record.port !== undefined ? { port: record.port } : undefined;
  return { pid: record.pid, upstream };
}
