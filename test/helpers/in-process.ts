import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../server/config.ts';
import { createControlPlane } from '../../server/control-plane.ts';
import { hashApiKey } from '../../server/crypto/api-key.ts';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import type { Resolve } from '../../server/domain/oauth/outbound.ts';
import { DOMAIN_STORE_RULES } from '../../server/domain/store-rules.ts';
import { type Clock, systemClock } from '../../server/lib/clock.ts';
import { type Logger, silentLogger } from '../../server/logger.ts';
import { openStore } from '../../server/store/open.ts';
import type { SqliteStore } from '../../server/store/sqlite.ts';
import { type Api, apiClient } from './api.ts';
import { testBackendKind, testDatabaseUrl } from './backends.ts';
import { rawSql } from './raw-sql.ts';

/**
 * The whole app in this process on an in-memory SQLite database (or a fresh PostgreSQL database
 * when the suite runs on PostgreSQL), called through `app.request()` (no port). Fast; for the rules
 * of single requests. End-to-end behaviour is tested on a port. `path` asks for that SQLite file.
 */
export async function inProcessApp(
  options: {
    stageMs?: number;
    path?: string;
    env?: Record<string, string>;
    oauthResolve?: Resolve;
    processId?: string;
    secretBox?: SecretBox;
    log?: Logger;
    clock?: Clock;
  } = {},
) {
  // Apps sharing one database (several "processes") share its encryption key, as servers do.
  const secretBox = options.secretBox ?? new SecretBox(randomBytes(32));
  const url = options.path ?? (await testDatabaseUrl(testBackendKind()));
  const backend = await openStore(url, { secretBox, synchronous: 'NORMAL', rules: DOMAIN_STORE_RULES });
  // Tests that look at the rows themselves use `sql` (either backend); `store.db` is SQLite's handle.
  const store = backend.core as SqliteStore;
  const sql = rawSql(url, backend.core);
  const apiKey = `test-${crypto.randomUUID()}`;
  const boot = await store.bootstrap({ keyHash: hashApiKey(apiKey), keyId: crypto.randomUUID(), now: systemClock.now() });
  const config = loadConfig({ SANDBOX_STAGE_MS: String(options.stageMs ?? 10), LOG_LEVEL: 'silent', DATABASE_URL: ':memory:', ...options.env });
  const controlPlane = createControlPlane({
    backend,
    clock: options.clock ?? systemClock,
    log: options.log ?? silentLogger,
    config,
    secretBox,
    publicUrl: () => 'http://localhost',
    oauthResolve: options.oauthResolve,
    processId: options.processId,
  });
  await controlPlane.start();
  const { app, services } = controlPlane;

  const client = (key: string, extra: Record<string, string> = {}): Api => apiClient('', key, extra, (url, init) => app.request(url, init));

  return {
    app,
    store,
    backend,
    sql,
    services,
    apiKey,
    workspaceId: boot.workspaceId,
    api: client(apiKey),
    client,
    /** Stops as a process that dies would (its leases run out); `stopCleanly` is a clean shutdown. */
    close: async () => {
      controlPlane.stop();
      await sql.close();
      await backend.close();
    },
    stopCleanly: async () => {
      controlPlane.stop();
      await controlPlane.releaseWork();
      await sql.close();
      await backend.close();
    },
  };
}
