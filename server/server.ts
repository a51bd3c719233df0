import { statSync } from 'node:fs';
import { createServer as createHttpServer, type Server, type ServerOptions } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import { type ServerType, serve } from '@hono/node-server';
import { type Config, publicUrl } from './config.ts';
import { createControlPlane } from './control-plane.ts';
import { generateApiKey, hashApiKey } from './crypto/api-key.ts';
import { SecretBox } from './crypto/secret-box.ts';
import { DOMAIN_STORE_RULES } from './domain/store-rules.ts';
import { loadEncryptionKey } from './encryption-key.ts';
import { withStoredGithubApp } from './github/manifest-flow.ts';
import { applyConnectionLimits, type ConnectionLimits, serverOptions } from './http/connection-limits.ts';
import { type NodeListener, revisionFastPath } from './http/revision-fast-lane.ts';
import { systemClock } from './lib/clock.ts';
import { createPrivateFile, makePrivateDir, tightenFileModes } from './lib/private-files.ts';
import { createLogger, type Logger } from './logger.ts';
import { healthApp } from './routes/health.ts';
import type { Services } from './services.ts';
import { databaseStartupError, StartupError } from './startup-errors.ts';
import { databaseFilePath, type StoreBackend } from './store/backend.ts';
import { openStore } from './store/open.ts';
import { startTracing } from './tracing.ts';

/** The connection limits the settings ask for, applied to every listening socket of the server. */
export function connectionLimitsOf(config: Config): ConnectionLimits {
  return {
    maxConnections: config.MAX_CONNECTIONS,
    headersTimeoutMs: config.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: config.REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: config.KEEP_ALIVE_TIMEOUT_MS,
  };
}

/**
 * An HTTP server for `fetch` with the connection limits applied, once it listens. `fastPath` may
 * answer some requests in Node's handler before they reach `fetch` (it hands the rest on).
 */
export function listen(
  fetch: (request: Request) => Response | Promise<Response>,
  port: number,
  hostname: string,
  limits: ConnectionLimits,
  fastPath?: (fallback: NodeListener) => NodeListener,
): Promise<ServerType> {
  return new Promise((resolve) => {
    // Typed as Node's overloaded createServer; @hono/node-server always calls it with (options, listener).
    const createServer = fastPath
      ? (((options: ServerOptions, listener: NodeListener) => createHttpServer(options, fastPath(listener))) as typeof createHttpServer)
      : undefined;
    const s = serve({ fetch, port, hostname, serverOptions: serverOptions(limits), createServer }, () => resolve(s));
    applyConnectionLimits(s as Server, limits);
  });
}

/**
 * The database, its WAL and shared-memory files and the key file beside it are the owner's only
 * (they hold every record, uploaded tarballs included): looser modes left by an earlier run, a copy
 * or a restore are warned about and fixed, and a new database file is made 0600 before SQLite opens
 * it, so the files SQLite adds take its mode.
 */
function keepDatabaseFilesPrivate(databasePath: string, log: Logger): void {
  for (const { path, mode, fixed } of tightenFileModes(['', '-wal', '-shm', '-journal', '.key'].map((suffix) => databasePath + suffix))) {
    if (fixed) log.warn('a file of the server was readable by other users; made it owner-only (0600)', { path, mode });
    else log.warn('a file of the server is readable by other users and could not be changed; make it owner-only (chmod 600)', { path, mode });
  }
  createPrivateFile(databasePath);
}

/** The key and the store; a path that cannot be used becomes a `StartupError` naming it. */
async function openDatabase(config: Config, log: Logger) {
  const databasePath = databaseFilePath(config.DATABASE_URL);
  let backend: StoreBackend | undefined;
  try {
    if (databasePath !== null && databasePath !== ':memory:') {
      makePrivateDir(dirname(databasePath));
      // Said before a key file is generated beside a path that can never be the database.
      if (statSync(databasePath, { throwIfNoEntry: false })?.isDirectory()) throw Object.assign(new Error('is a directory'), { code: 'EISDIR' });
      keepDatabaseFilesPrivate(databasePath, log);
    }
    // A database server has no folder to keep a generated key in: the key must be configured.
    if (databasePath === null && !config.ENCRYPTION_KEY)
      throw new StartupError('ENCRYPTION_KEY must be set when DATABASE_URL names a PostgreSQL server (openssl rand -base64 32).');
    const secretBox = new SecretBox(loadEncryptionKey(config.ENCRYPTION_KEY, databasePath ?? ':memory:', log));
    backend = await openStore(config.DATABASE_URL, {
      secretBox,
      synchronous: config.SQLITE_SYNCHRONOUS,
      poolSize: config.DATABASE_POOL_SIZE,
      log,
      rules: DOMAIN_STORE_RULES,
    });
    // Opening may only read; a database that cannot be written would fail at the first request instead.
    await backend.probeWrite();
    return { secretBox, backend };
  } catch (error) {
    await backend?.close();
    if (error instanceof StartupError) throw error;
    throw (databasePath !== null && databaseStartupError(error, databasePath)) || error;
  }
}

export type RunningServer = {
  port: number;
  /** The health port (`HEALTH_PORT`), when there is one. */
  healthPort?: number;
  services: Services;
  /** Stops accepting requests, stops the pipeline's timers and closes the database. */
  close(): Promise<void>;
};

/**
 * Opens the store, makes sure a key exists, starts HTTP, then resumes the pipeline. `print`
 * receives the one-time message with a generated API key (stdout by default, never the log).
 */
export async function startServer(givenConfig: Config, options: { log?: Logger; print?: (text: string) => void } = {}): Promise<RunningServer> {
  const log = options.log ?? createLogger(givenConfig.LOG_LEVEL);
  const { secretBox, backend } = await openDatabase(givenConfig, log);
  // The GitHub App made from the manifest, unless the environment names one.
  const config = await withStoredGithubApp(givenConfig, backend.github, secretBox, log);
  const store = backend.core;

  const bootstrap = (keyHash: string | null) => store.bootstrap({ keyHash, keyId: crypto.randomUUID(), now: systemClock.now() });
  if (config.BOOTSTRAP_API_KEY) {
    // Idempotent: one transaction, which writes nothing when the key is there already.
    await bootstrap(hashApiKey(config.BOOTSTRAP_API_KEY));
  } else if ((await bootstrap(null)).wasEmpty) {
    // A generated key is only stored when the database has none.
    const generated = generateApiKey();
    await bootstrap(hashApiKey(generated));
    (options.print ?? ((text) => process.stdout.write(text)))(
      `\nAn API key was created for the organization 'default' (shown once, never again):\n\n    ${generated}\n\n` +
        `Use it as the X-Api-Key header. Set BOOTSTRAP_API_KEY to choose the key yourself.\n\n`,
    );
  }

  let port = config.PORT;
  const tracer = config.OTEL_EXPORTER_OTLP_ENDPOINT ? await startTracing(config.OTEL_EXPORTER_OTLP_ENDPOINT, config.OTEL_SERVICE_NAME) : undefined;
  const controlPlane = createControlPlane({ backend, clock: systemClock, log, config, secretBox, publicUrl: () => publicUrl(config, port), tracer });
  // Resume before accepting requests, so no revision created meanwhile is handed out twice.
  await controlPlane.start();
  const limits = connectionLimitsOf(config);
  const server = await listen(controlPlane.app.fetch, config.PORT, config.HOST, limits, (fallback) => revisionFastPath(controlPlane.services, fallback));
  port = (server.address() as AddressInfo).port;
  // Probes get a port of their own, so that a flood of connections on the main port cannot starve them.
  const healthServer =
    config.HEALTH_PORT === undefined
      ? null
      : await listen(healthApp(controlPlane.services.readiness, controlPlane.services.metrics).fetch, config.HEALTH_PORT, config.HOST, {
          ...limits,
          maxConnections: config.HEALTH_MAX_CONNECTIONS,
          headersTimeoutMs: Math.min(limits.headersTimeoutMs, 5000),
          requestTimeoutMs: Math.min(limits.requestTimeoutMs, 5000),
        });
  const healthPort = healthServer ? (healthServer.address() as AddressInfo).port : undefined;
  log.info('listening', {
    host: config.HOST,
    port,
    health_port: healthPort,
    database: backend.description,
    // Which data plane a deployment gets is its listener's: the line must not say "sandbox" alone while agents build for real.
    data_plane: 'per listener: sandbox listeners simulate (nothing is built or run); local and k8s listeners are served by their agents',
  });

  return {
    port,
    healthPort,
    services: controlPlane.services,
    close: async () => {
      controlPlane.stop();
      const servers = healthServer ? [server, healthServer] : [server];
      const closed = Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
      // Held long-polls would keep the server open for up to a minute: end them.
      for (const s of servers) if ('closeAllConnections' in s) s.closeAllConnections();
      await closed;
      await controlPlane.releaseWork();
      await tracer?.shutdown().catch((error: unknown) => log.warn('tracing: the last spans could not be exported', { error: String(error) }));
      await backend.close();
    },
  };
}
