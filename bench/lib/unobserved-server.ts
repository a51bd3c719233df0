import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MiddlewareHandler } from 'hono';
import { type Config, publicUrl } from '../../server/config.ts';
import { createControlPlane } from '../../server/control-plane.ts';
import { hashApiKey } from '../../server/crypto/api-key.ts';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { DOMAIN_STORE_RULES } from '../../server/domain/store-rules.ts';
import { revisionFastPath } from '../../server/http/revision-fast-lane.ts';
import { systemClock } from '../../server/lib/clock.ts';
import { runInRequestScope } from '../../server/lib/request-scope.ts';
import { silentLogger } from '../../server/logger.ts';
import type { Metrics } from '../../server/metrics.ts';
import { connectionLimitsOf, listen } from '../../server/server.ts';
import { openStore } from '../../server/store/open.ts';
import { startTracing } from '../../server/tracing.ts';

/**
 * For bench/observability-cost.ts only: this tree's server composed from its own modules
 * (`createControlPlane`, the revision fast lane, @hono/node-server with the same connection
 * limits as `startServer`), with or without the observability layer. `observed: false` removes
 * exactly that layer and nothing else:
 * - metrics: no `Metrics` (no prom-client registry, no default process metrics); the counting
 *   calls reach methods that do nothing;
 * - request ids and the log scope: no `observeRequests` (no id made or answered, no timing, no
 *   debug line, no span hook) and no id in the fast lane's answers;
 * - tracing: none (with the layer, on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, as in
 *   `startServer`); what remains of it with tracing off is the `tracer?.` checks at its call sites.
 * The audit trail stays, and with it the request scope that carries a request's pending entry to
 * the store (an AsyncLocalStorage run per request): the audit row is measured on its own.
 * `observed: true` is the same composition with the layer, so "observed ÷ unobserved" is the
 * layer's cost alone; it is also measured against the real `startServer` to show the composition
 * adds nothing of its own.
 */
export async function startComposedServer(config: Config, observed: boolean): Promise<{ port: number; close: () => Promise<void> }> {
  // Tracing on (an endpoint set) only with the layer: its spans are part of it.
  const tracer = observed && config.OTEL_EXPORTER_OTLP_ENDPOINT ? await startTracing(config.OTEL_EXPORTER_OTLP_ENDPOINT, config.OTEL_SERVICE_NAME) : undefined;
  const secretBox = new SecretBox(randomBytes(32));
  const backend = await openStore(config.DATABASE_URL, {
    secretBox,
    synchronous: config.SQLITE_SYNCHRONOUS,
    poolSize: config.DATABASE_POOL_SIZE,
    log: silentLogger,
    rules: DOMAIN_STORE_RULES,
  });
  await backend.core.bootstrap({ keyHash: hashApiKey(config.BOOTSTRAP_API_KEY!), keyId: crypto.randomUUID(), now: systemClock.now() });
  let port = 0;
  const controlPlane = createControlPlane({
    backend,
    clock: systemClock,
    log: silentLogger,
    config,
    secretBox,
    publicUrl: () => publicUrl(config, port),
    tracer,
    ...(observed ? {} : { metrics: UNCOUNTED, observeRequests: AUDIT_SCOPE_ONLY }),
  });
  await controlPlane.start();
  // The server's own listening (server.ts), with the lane as observed or not.
  const server = (await listen(controlPlane.app.fetch, 0, '127.0.0.1', connectionLimitsOf(config), (fallback) =>
    revisionFastPath(controlPlane.services, fallback, { observed }),
  )) as Server;
  port = (server.address() as AddressInfo).port;
  return {
    port,
    close: async () => {
      controlPlane.stop();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await controlPlane.releaseWork();
      await tracer?.shutdown();
      await backend.close();
    },
  };
}

/** Metrics that count nothing: what the server's counting calls reach without the metrics layer. */
const UNCOUNTED = {
  httpAnswered() {},
  revisionChanged() {},
  webhookDelivery() {},
  githubRequest() {},
  text: async () => ({ body: '', contentType: 'text/plain' }),
} as unknown as Metrics;

/** In place of `observeRequests`: only the request scope the audit trail puts its pending entry in. */
const AUDIT_SCOPE_ONLY: MiddlewareHandler = (_c, next) => runInRequestScope({ requestId: 'unobserved' }, next);
