import { serve, type ServerType } from '@hono/node-server';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { AddressInfo } from 'node:net';
import { publicUrl, type Config } from './config.ts';
import { createControlPlane } from './control-plane.ts';
import { generateApiKey, hashApiKey } from './crypto/api-key.ts';
import { SecretBox } from './crypto/secret-box.ts';
import { systemClock } from './domain/clock.ts';
import { loadEncryptionKey } from './encryption-key.ts';
import { createLogger, type Logger } from './logger.ts';
import type { Services } from './services.ts';
import { openSqliteStore, type SqliteStore } from './store/sqlite.ts';
import { databaseStartupError } from './startup-errors.ts';
import { sqliteWriteProbe } from './store/write-probe.ts';

/** The key and the store; a path that cannot be used becomes a `StartupError` naming it. */
function openDatabase(config: Config, databasePath: string, log: Logger) {
  let store: SqliteStore | undefined;
  try {
    if (databasePath !== ':memory:') mkdirSync(dirname(databasePath), { recursive: true });
    const secretBox = new SecretBox(loadEncryptionKey(config.ENCRYPTION_KEY, databasePath, log));
    store = openSqliteStore({ path: databasePath, secretBox, synchronous: config.SQLITE_SYNCHRONOUS });
    // Opening may only read; a database that cannot be written would fail at the first request instead.
    sqliteWriteProbe(store.db)();
    return { secretBox, store };
  } catch (error) {
    store?.close();
    throw databaseStartupError(error, databasePath) ?? error;
  }
}

export type RunningServer = {
  port: number;
  services: Services;
  /** Stops accepting requests, stops the pipeline's timers and closes the database. */
  close(): Promise<void>;
};

/**
 * Opens the store, makes sure a key exists, starts HTTP, then resumes the pipeline. `print`
 * receives the one-time message with a generated API key (stdout by default, never the log).
 */
export async function startServer(config: Config, options: { log?: Logger; print?: (text: string) => void } = {}): Promise<RunningServer> {
  const log = options.log ?? createLogger(config.LOG_LEVEL);
  const databasePath = config.DATABASE_URL.replace(/^sqlite:(\/\/)?/, '');
  const { secretBox, store } = openDatabase(config, databasePath, log);

  const generated = config.BOOTSTRAP_API_KEY ? null : generateApiKey();
  const bootstrapKey = config.BOOTSTRAP_API_KEY ?? generated!;
  // Idempotent for BOOTSTRAP_API_KEY; a generated key is only stored when the database has none.
  const probe = await store.bootstrap({ keyHash: null, keyId: crypto.randomUUID(), now: systemClock.now() });
  if (config.BOOTSTRAP_API_KEY || probe.wasEmpty) {
    await store.bootstrap({ keyHash: hashApiKey(bootstrapKey), keyId: crypto.randomUUID(), now: systemClock.now() });
  }
  if (generated && probe.wasEmpty) {
    (options.print ?? ((text) => process.stdout.write(text)))(
      `\nAn API key was created for the organization 'default' (shown once, never again):\n\n    ${generated}\n\n` +
        `Use it as the X-Api-Key header. Set BOOTSTRAP_API_KEY to choose the key yourself.\n\n`,
    );
  }

  let port = config.PORT;
  const controlPlane = createControlPlane({ store, clock: systemClock, log, config, secretBox, publicUrl: () => publicUrl(config, port) });
  // Resume before accepting requests, so no revision created meanwhile is handed out twice.
  await controlPlane.start();
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: controlPlane.app.fetch, port: config.PORT, hostname: config.HOST }, () => resolve(s));
  });
  port = (server.address() as AddressInfo).port;
  log.info('listening', { host: config.HOST, port, database: databasePath, data_plane: 'sandbox (simulated: nothing is built or run)' });

  return {
    port,
    services: controlPlane.services,
    close: async () => {
      controlPlane.stop();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Held long-polls would keep the server open for up to a minute: end them.
      if ('closeAllConnections' in server) server.closeAllConnections();
      await closed;
      store.close();
    },
  };
}
