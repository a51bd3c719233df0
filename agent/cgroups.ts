import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What one sandboxed command may use: memory (MiB), processes, CPU (cores). */
/**
 * One command's limits. `cpuWeight`: its share of the CPU when commands contend for it, relative
 * to 100 (the kernel's default, what servers get); installs and builds get less (BUILD_CPU_WEIGHT),
 * so a neighbour's build waits for a server's request rather than the other way round.
 */
export type Limits = { memoryMb: number; pidsMax: number; cpus: number; cpuWeight?: number };

/** The CPU weight of installs and builds: a fifth of a server's when both want the CPU. */
export const BUILD_CPU_WEIGHT = 20;

/**
 * How this machine offers cgroups to the agent (docs/decisions/local-agent-limits.md): cgroup v2
 * with the memory, pids and cpu controllers enabled for the agent's folder, or the cgroup v1
 * hierarchies of those three controllers, writable (the agent runs as root).
 */
export type CgroupHost = { version: 2; root: string } | { version: 1; roots: { memory: string; pids: string; cpu: string } };

/** The agent cannot limit resources here: says why (it then refuses to start, unless `--limits none`). */
export class LimitsUnavailable extends Error {
  override readonly name = 'LimitsUnavailable';
}

const MOUNT = '/sys/fs/cgroup';
/** The folder of the agent's cgroups under each hierarchy. */
const AGENT_FOLDER = 'cp-agent';

function writable(dir: string): boolean {
  try {
    mkdirSync(join(dir, AGENT_FOLDER), { recursive: true });
    return true;
  } catch {
    return false;
  }
}

/**
 * Finds the cgroups the agent can use: v2 where `/sys/fs/cgroup` is a v2 hierarchy whose root
 * offers memory, pids and cpu and the agent may make its folder there (root, or a delegated
 * hierarchy); else v1 where those three controllers are mounted and writable. Throws
 * LimitsUnavailable naming what is missing.
 */
export function findCgroups(mount = MOUNT): CgroupHost {
  const controllers = join(mount, 'cgroup.controllers');
  if (existsSync(controllers)) {
    const offered = readFileSync(controllers, 'utf8').trim().split(/\s+/);
    const missing = ['memory', 'pids', 'cpu'].filter((name) => !offered.includes(name));
    if (missing.length === 0 && writable(mount)) {
      const root = join(mount, AGENT_FOLDER);
      try {
        // Children of the agent's folder get the three controllers.
        writeFileSync(join(mount, 'cgroup.subtree_control'), '+memory +pids +cpu');
        writeFileSync(join(root, 'cgroup.subtree_control'), '+memory +pids +cpu');
        return { version: 2, root };
      } catch (error) {
        throw new LimitsUnavailable(`cgroup v2 at ${mount} would not enable memory, pids and cpu for the agent: ${(error as Error).message}`);
      }
    }
    if (missing.length > 0 && !existsSync(join(mount, 'memory'))) {
      throw new LimitsUnavailable(`cgroup v2 at ${mount} offers no ${missing.join(', ')} controller to the agent`);
    }
  }
  const roots = { memory: join(mount, 'memory'), pids: join(mount, 'pids'), cpu: join(mount, 'cpu') };
  const unusable = Object.entries(roots)
    .filter(([, dir]) => !existsSync(join(dir, 'cgroup.procs')) || !writable(dir))
    .map(([name]) => name);
  if (unusable.length > 0)
    throw new LimitsUnavailable(
      `no cgroup the agent can limit ${unusable.join(', ')} with: neither cgroup v2 with those controllers delegated nor writable cgroup v1 hierarchies at ${mount} (run the agent as root, or delegate a cgroup v2 subtree to it)`,
    );
  return { version: 1, roots };
}

/**
 * One command's cgroup (`cp-agent/<name>` in each hierarchy): made with its limits before the
 * command starts, joined by the command's first process (so everything it starts is inside),
 * read after it ends to tell which limit it reached, removed then.
 */
export class Cgroup {
  readonly #dirs: { memory: string; pids: string; cpu: string };
  readonly #version: 1 | 2;
  readonly limits: Limits;

  constructor(host: CgroupHost, name: string, limits: Limits) {
    this.limits = limits;
    this.#version = host.version;
    const bytes = String(Math.floor(limits.memoryMb * 1024 * 1024));
    const period = 100_000;
    const quota = String(Math.max(1000, Math.round(limits.cpus * period)));
    const weight = Math.min(10_000, Math.max(1, Math.round(limits.cpuWeight ?? 100)));
    if (host.version === 2) {
      const dir = join(host.root, name);
      this.#dirs = { memory: dir, pids: dir, cpu: dir };
      fresh(dir);
      writeFileSync(join(dir, 'memory.max'), bytes);
      // No swap: past its memory a command is stopped, not slowed for everyone by swapping.
      if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
      writeFileSync(join(dir, 'pids.max'), String(limits.pidsMax));
      writeFileSync(join(dir, 'cpu.max'), `${quota} ${period}`);
      writeFileSync(join(dir, 'cpu.weight'), String(weight));
    } else {
      this.#dirs = {
        memory: join(host.roots.memory, AGENT_FOLDER, name),
        pids: join(host.roots.pids, AGENT_FOLDER, name),
        cpu: join(host.roots.cpu, AGENT_FOLDER, name),
      };
      for (const dir of Object.values(this.#dirs)) fresh(dir);
      writeFileSync(join(this.#dirs.memory, 'memory.limit_in_bytes'), bytes);
      const memsw = join(this.#dirs.memory, 'memory.memsw.limit_in_bytes');
      if (existsSync(memsw)) writeFileSync(memsw, bytes);
      writeFileSync(join(this.#dirs.pids, 'pids.max'), String(limits.pidsMax));
      writeFileSync(join(this.#dirs.cpu, 'cpu.cfs_period_us'), String(period));
      writeFileSync(join(this.#dirs.cpu, 'cpu.cfs_quota_us'), quota);
      // v1's shares: 1024 is its default, as 100 is v2's weight.
      writeFileSync(join(this.#dirs.cpu, 'cpu.shares'), String(Math.max(2, Math.round((weight * 1024) / 100))));
    }
  }

  /**
   * The command prefix that moves the command's first process into this cgroup and then runs the
   * rest (`"$@"`): runs as the agent (writing `cgroup.procs` needs its rights), before the
   * sandbox drops them.
   */
  joinPrefix(): string[] {
    const files = [...new Set(Object.values(this.#dirs))].map((dir) => join(dir, 'cgroup.procs'));
    const script = `${files.map((file) => `echo $$ > '${file}'`).join(' && ')} && exec "$@"`;
    return ['sh', '-c', script, 'cgroup-join'];
  }

  /** The limit the command reached, as a status message says it ("memory limit of 256 MiB reached"), or null. */
  breach(): string | null {
    if (counter(this.#version === 2 ? join(this.#dirs.memory, 'memory.events') : join(this.#dirs.memory, 'memory.oom_control'), 'oom_kill') > 0)
      return `memory limit of ${this.limits.memoryMb} MiB reached`;
    if (counter(join(this.#dirs.pids, 'pids.events'), 'max') > 0) return `process limit of ${this.limits.pidsMax} reached (--pids-max)`;
    return null;
  }

  /** Removes the cgroup once nothing runs in it (a cgroup with processes cannot be removed; it is then left). */
  remove(): void {
    for (const dir of new Set(Object.values(this.#dirs))) {
      try {
        rmdirSync(dir);
      } catch {
        // still has processes (a server left serving), or gone
      }
    }
  }
}

/** A cgroup folder made empty: one left by an earlier attempt is removed first when nothing runs in it. */
function fresh(dir: string): void {
  try {
    rmdirSync(dir);
  } catch {
    // absent, or still in use: then it is reused with the new limits
  }
  mkdirSync(dir, { recursive: true });
}

/** A `name value` line's value in a cgroup events file (0 when absent). */
function counter(file: string, name: string): number {
  try {
    const line = readFileSync(file, 'utf8')
      .split('\n')
      .find((l) => l.startsWith(`${name} `));
    return line ? Number(line.split(' ')[1]) || 0 : 0;
  } catch {
    return 0;
  }
}
