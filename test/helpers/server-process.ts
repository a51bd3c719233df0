import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testBackendKind, testDatabaseUrl } from './backends.ts';
import { TEST_KEEP_ALIVE_MS } from './keep-alive.ts';
import { startListeningChild } from './listening-child.ts';

export type ServerProcess = {
  url: string;
  port: number;
  apiKey: string;
  /** The SQLite file (on the SQLite backend; on PostgreSQL a path nothing is written to). */
  databasePath: string;
  /** The process's DATABASE_URL: the SQLite file, or its own database on the run's PostgreSQL. */
  databaseUrl: string;
  /** Everything the process wrote to stderr (the JSON log) and stdout so far. */
  output(): string;
  /** Sends the signal and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts a new process on the same database and port settings. */
  restart(extraEnv?: Record<string, string>): Promise<ServerProcess>;
};

/**
 * Node's compile cache for the test servers (one folder per machine, shared by every run): a start
 * after the first reads V8's code for the server's modules, its sources and packages, instead of
 * compiling them again: 1.4 s of CPU to listening → 0.7 s (68 test files start servers).
 * Node keys each entry by the file's content and checks it when read: an edited source is compiled
 * anew, a damaged entry is compiled again, never run.
 */
export const COMPILE_CACHE = join(tmpdir(), 'cp-test-compile-cache');

/**
 * The server bundle of the test run (`<folder>/main.js`), set by test/setup/server-bundle-global.ts,
 * which builds it from the working tree at the start of every run. Unset (a bench), the sources run.
 */
export const SERVER_BUNDLE_ENV = 'CP_TEST_SERVER_BUNDLE';

export type ServerOptions = {
  /**
   * Run `server/main.ts` rather than the run's bundle. A test that needs the sources says why; the
   * others run what `npm start` runs, started at half the CPU (0.35 s against 0.7 s, 68 files start servers).
   */
  sources?: boolean;
};

type Reuse = { databasePath: string; apiKey: string; databaseUrl?: string; encryptionKey?: string };

/** Server processes started by this process, for the per-file CPU log (test/setup/cpu-log.ts, which reads the same key). */
const SERVER_STARTS = Symbol.for('cp-test-server-starts');

function countServerStart(): void {
  const counts = globalThis as { [SERVER_STARTS]?: number };
  counts[SERVER_STARTS] = (counts[SERVER_STARTS] ?? 0) + 1;
}

/** The script a server process runs: the run's bundle, or the sources when asked or when there is none. */
function serverScript(options: ServerOptions): string {
  const bundle = process.env[SERVER_BUNDLE_ENV];
  return bundle && !options.sources ? bundle : 'server/main.ts';
}

/**
 * Starts the real server (the run's bundle, or `node server/main.ts`: `ServerOptions`, with the
 * same Node that runs the tests) on a loopback port chosen by the OS, with its own SQLite file, or
 * with its own PostgreSQL database when the suite runs on PostgreSQL (`TEST_BACKEND=postgres`), and
 * waits for it to listen.
 */
export async function startServerProcess(env: Record<string, string> = {}, options: ServerOptions = {}, reuse?: Reuse): Promise<ServerProcess> {
  const databasePath = reuse?.databasePath ?? join(mkdtempSync(join(tmpdir(), 'cp-test-')), 'control-plane.db');
  const apiKey = reuse?.apiKey ?? `test-key-${crypto.randomUUID()}`;
  // A test that names its DATABASE_URL gets it; otherwise the suite's backend decides.
  const databaseUrl = env.DATABASE_URL ?? reuse?.databaseUrl ?? (await testDatabaseUrl(testBackendKind(), databasePath));
  // A database server has no folder for a generated key: the server needs one given, the same on restart.
  const encryptionKey = reuse?.encryptionKey ?? (databaseUrl.startsWith('postgres') ? randomBytes(32).toString('base64') : undefined);
  const fullEnv = {
    DATABASE_URL: databaseUrl,
    BOOTSTRAP_API_KEY: apiKey,
    SANDBOX_STAGE_MS: '100',
    LOG_LEVEL: 'info',
    // Idle connections outlive any wait of a test, so a starved client never reuses one just closed.
    KEEP_ALIVE_TIMEOUT_MS: String(TEST_KEEP_ALIVE_MS),
    NODE_COMPILE_CACHE: COMPILE_CACHE,
    ...(encryptionKey ? { ENCRYPTION_KEY: encryptionKey } : {}),
    ...env,
  };
  // The helper's 60 s, not 20: at the start of a whole run (every worker transforming its files,
  // the embedded PostgreSQL's initdb, agent builds) on a loaded 2-core machine a server took over
  // 20 s to print its first line, and files failed before testing anything. Alone it starts in 1 s.
  countServerStart();
  const child = await startListeningChild(serverScript(options), fullEnv);
  const server: ServerProcess = {
    url: child.url,
    port: child.port,
    apiKey,
    databasePath,
    databaseUrl,
    output: child.output,
    kill: child.stop,
    restart: (extraEnv = {}) => startServerProcess({ ...env, ...extraEnv }, options, { databasePath, apiKey, databaseUrl, encryptionKey }),
  };
  return server;
}
