import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startListeningChild } from './listening-child.ts';

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
    DATABASE_URL: databasePath,
    BOOTSTRAP_API_KEY: apiKey,
    SANDBOX_STAGE_MS: '100',
    LOG_LEVEL: 'info',
    ...env,
  };
  const child = await startListeningChild('server/main.ts', fullEnv, 20_000);
  const server: ServerProcess = {
    url: child.url,
    port: child.port,
    apiKey,
    databasePath,
    output: child.output,
    kill: child.stop,
    restart: (extraEnv = {}) => startServerProcess({ ...env, ...extraEnv }, { databasePath, apiKey }),
  };
  return server;
}
