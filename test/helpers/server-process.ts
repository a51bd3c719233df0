import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');

export type ServerProcess = {
  url: string;
  port: number;
  apiKey: string;
  databasePath: string;
  /** Everything the process wrote to stderr (the JSON log) and stdout so far. */
  output(): string;
  /** Sends the signal and waits for the process to exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Starts a new process on the same database and port settings. */
  restart(extraEnv?: Record<string, string>): Promise<ServerProcess>;
};

/**
 * Starts the real server (`node server/main.ts`, the same Node that runs the tests) on a
 * loopback port chosen by the OS, with its own SQLite file, and waits for it to listen.
 */
export async function startServerProcess(env: Record<string, string> = {}, reuse?: { databasePath: string; apiKey: string }): Promise<ServerProcess> {
  const databasePath = reuse?.databasePath ?? join(mkdtempSync(join(tmpdir(), 'cp-test-')), 'control-plane.db');
  const apiKey = reuse?.apiKey ?? `test-key-${crypto.randomUUID()}`;
  const fullEnv = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: databasePath,
    BOOTSTRAP_API_KEY: apiKey,
    SANDBOX_STAGE_MS: '100',
    LOG_LEVEL: 'info',
    ...env,
  };
  const child: ChildProcess = spawn(process.execPath, [join(ROOT, 'server/main.ts')], { cwd: ROOT, env: fullEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));

  const port = await new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${output}`)), 20_000);
    const onData = () => {
      const match = /"msg":"listening".*?"port":(\d+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        child.stderr!.off('data', onData);
        resolvePort(Number(match[1]));
      }
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${output}`));
    });
  });

  const server: ServerProcess = {
    url: `http://127.0.0.1:${port}`,
    port,
    apiKey,
    databasePath,
    output: () => output,
    kill: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
    restart: (extraEnv = {}) => startServerProcess({ ...env, ...extraEnv }, { databasePath, apiKey }),
  };
  return server;
}
