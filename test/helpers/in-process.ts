import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../server/config.ts';
import { createControlPlane } from '../../server/control-plane.ts';
import { hashApiKey } from '../../server/crypto/api-key.ts';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { systemClock } from '../../server/domain/clock.ts';
import type { Resolve } from '../../server/domain/oauth/outbound.ts';
import { silentLogger } from '../../server/logger.ts';
import { openSqliteBackend } from '../../server/store/sqlite-backend.ts';
import { apiClient, type Api } from './api.ts';

/**
 * The whole app in this process on an in-memory SQLite database, called through `app.request()`
 * (no port). Fast; for the rules of single requests. End-to-end behaviour is tested on a port.
 */
export async function inProcessApp(options: { stageMs?: number; path?: string; env?: Record<string, string>; oauthResolve?: Resolve } = {}) {
  const secretBox = new SecretBox(randomBytes(32));
  const backend = openSqliteBackend(options.path ?? ':memory:', { secretBox, synchronous: 'NORMAL' });
  const store = backend.core;
  const apiKey = `test-${crypto.randomUUID()}`;
  const boot = await store.bootstrap({ keyHash: hashApiKey(apiKey), keyId: crypto.randomUUID(), now: systemClock.now() });
  const config = loadConfig({ SANDBOX_STAGE_MS: String(options.stageMs ?? 10), LOG_LEVEL: 'silent', DATABASE_URL: ':memory:', ...options.env });
  const controlPlane = createControlPlane({ backend, clock: systemClock, log: silentLogger, config, secretBox, publicUrl: () => 'http://localhost', oauthResolve: options.oauthResolve });
  await controlPlane.start();
  const { app, services } = controlPlane;

  const client = (key: string, extra: Record<string, string> = {}): Api => apiClient('', key, extra, (url, init) => app.request(url, init));

  return {
    app,
    store,
    backend,
    services,
    apiKey,
    workspaceId: boot.workspaceId,
    api: client(apiKey),
    client,
    close: () => {
      controlPlane.stop();
      void backend.close();
    },
  };
}
