import { randomBytes } from 'node:crypto';
import { type Api, apiClient } from './api.ts';
import { testDatabaseUrl } from './backends.ts';
import { type ServerProcess, startServerProcess } from './server-process.ts';

/**
 * Three (or `size`) real server processes (the run's bundle, test/helpers/server-process.ts) on ONE PostgreSQL database, as
 * a team runs replicas behind a load balancer (contract §10), with no balancer: the tests choose
 * the process of each request themselves. Several processes on one SQLite file are not supported,
 * so a cluster is always on the run's PostgreSQL (test/setup/postgres-global.ts), in a database of
 * its own.
 */
export type Cluster = {
  /** The processes by index; a killed one stays in its slot (see `alive`). */
  readonly processes: readonly ServerProcess[];
  readonly apiKey: string;
  readonly databaseUrl: string;
  /** The seed of `random()`'s choices: `CLUSTER_SEED=<seed>` re-runs the same sequence of processes. */
  readonly seed: number;
  /** Indexes of the processes not killed. */
  alive(): number[];
  /** A client bound to process `i`. */
  api(i: number, apiKey?: string): Api;
  /** A client that sends each request to a process picked at random (seeded) among the live ones. */
  random(apiKey?: string): Api;
  /** The URL of a live process picked at random (seeded), for requests made without the API client. */
  randomUrl(): string;
  /** Sends `signal` to process `i` and waits for it to exit; later `random()` requests avoid it. */
  kill(i: number, signal?: NodeJS.Signals): Promise<void>;
  /** Stops every live process (SIGTERM) and waits for them. */
  stopAll(): Promise<void>;
  /** Everything every process logged, for a failure's message. */
  output(): string;
};

/** SIGTERM, and SIGKILL when the process has not exited within `ms` (a test's teardown must end). */
async function stopWithin(server: ServerProcess, ms: number): Promise<void> {
  const timer = setTimeout(() => void server.kill('SIGKILL'), ms);
  try {
    await server.kill('SIGTERM');
  } finally {
    clearTimeout(timer);
  }
}

/** mulberry32: a small seeded generator, so a failing sequence of choices can be replayed. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Starts `size` processes at once on a new database of the run's PostgreSQL, all with the same
 * `DATABASE_URL`, `ENCRYPTION_KEY` and bootstrap key: they race for the migrations (an advisory
 * lock) and the bootstrap (idempotent) as replicas started together by an orchestrator do.
 * `env` is added to every process's settings.
 */
export async function startCluster(env: Record<string, string> = {}, size = 3): Promise<Cluster> {
  const databaseUrl = await testDatabaseUrl('postgres');
  const apiKey = `cluster-key-${randomBytes(16).toString('hex')}`;
  const encryptionKey = randomBytes(32).toString('base64');
  const seed = process.env.CLUSTER_SEED ? Number(process.env.CLUSTER_SEED) : randomBytes(4).readUInt32LE(0);
  // Printed so that a failed run can be repeated with the same choices of process.
  console.info(`cluster: ${size} processes, CLUSTER_SEED=${seed}`);
  const next = seeded(seed);

  const started = await Promise.allSettled(
    Array.from({ length: size }, () =>
      // `databasePath` is unused on PostgreSQL; the reuse names the shared database, key and bootstrap key.
      startServerProcess({ LOG_LEVEL: 'info', ...env }, {}, { databasePath: '/nonexistent/unused.db', apiKey, databaseUrl, encryptionKey }),
    ),
  );
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    for (const s of started) if (s.status === 'fulfilled') await s.value.kill('SIGKILL');
    throw (failed as PromiseRejectedResult).reason;
  }
  const processes = started.map((s) => (s as PromiseFulfilledResult<ServerProcess>).value);
  const dead = new Set<number>();

  const alive = () => processes.map((_, i) => i).filter((i) => !dead.has(i));
  const randomUrl = () => {
    const live = alive();
    if (live.length === 0) throw new Error('cluster: every process has been killed');
    return processes[live[Math.floor(next() * live.length)]!]!.url;
  };

  return {
    processes,
    apiKey,
    databaseUrl,
    seed,
    alive,
    api: (i, key = apiKey) => apiClient(processes[i]!.url, key),
    // The base URL is chosen per request: the client's `fetchImpl` prefixes a live process's URL.
    random: (key = apiKey) => apiClient('', key, {}, (path, init) => fetch(randomUrl() + path, init)),
    randomUrl,
    kill: async (i, signal = 'SIGTERM') => {
      dead.add(i);
      await processes[i]!.kill(signal);
    },
    stopAll: async () => {
      const live = alive();
      for (const i of live) dead.add(i);
      await Promise.all(live.map((i) => stopWithin(processes[i]!, 10_000)));
    },
    output: () => processes.map((p, i) => `--- process ${i} (${p.url}) ---\n${p.output()}`).join('\n'),
  };
}
