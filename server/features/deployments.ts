import type { Config } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { Uploads } from '../domain/uploads.ts';
import type { Clock } from '../lib/clock.ts';
import { sweepLoop } from '../lib/poll-loop.ts';
import type { Logger } from '../logger.ts';
import { deploymentRoutes } from '../routes/deployments.ts';
import { healthRoutes } from '../routes/health.ts';
import { projectLogRoutes } from '../routes/project-logs.ts';
import { revisionRoutes } from '../routes/revisions.ts';
import { tracingProjectRoutes } from '../routes/tracing-projects.ts';
import { uploadRoutes } from '../routes/uploads.ts';
import { workspaceRoutes } from '../routes/workspaces.ts';
import type { UploadStore } from '../store/uploads.ts';
import type { Feature } from './feature.ts';

/**
 * Deployments and revisions, the core of the hosted API (contract §§3–6): health, workspaces and
 * keys, deployments, revisions and their logs, tracing projects, and the source tarballs of
 * `internal_source` deployments (the signed PUT takes no API key). Its routes read the domain
 * services every route is handed (`RouteContext.services`); what it owns beyond them is the uploads'
 * store and their two workers (receivers' leases, the sweep of stale tarballs).
 */
export function deploymentsFeature(deps: {
  uploads: UploadStore;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'UPLOAD_URL_TTL_SECONDS' | 'UPLOAD_MAX_BYTES' | 'UPLOAD_WORKSPACE_QUOTA_BYTES' | 'PIPELINE_LEASE_MS'>;
  secretBox: SecretBox;
  publicUrl: () => string;
  processId: string;
}): Feature & { uploads: Uploads } {
  const ttlMs = deps.config.UPLOAD_URL_TTL_SECONDS * 1000;
  const uploads = new Uploads({
    store: deps.uploads,
    clock: deps.clock,
    log: deps.log,
    signingKey: deps.secretBox.deriveKey('upload-url'),
    publicUrl: deps.publicUrl,
    ttlMs,
    maxBytes: deps.config.UPLOAD_MAX_BYTES,
    workspaceQuotaBytes: deps.config.UPLOAD_WORKSPACE_QUOTA_BYTES,
    processId: deps.processId,
    leaseMs: deps.config.PIPELINE_LEASE_MS,
  });
  // Stale uploads are swept once a URL lifetime, so tarballs nobody used do not wait for their deployment's next upload to go.
  const uploadSweep = sweepLoop({
    sweep: () => uploads.sweep(),
    everyMs: ttlMs,
    onRemoved: (removed) => deps.log.info('uploads: removed stale tarballs and expired URLs', { removed }),
    onError: (error) => deps.log.warn('uploads: the sweep failed; it runs again later', { error: String(error) }),
  });
  return {
    name: 'deployments',
    uploads,
    routes(ctx) {
      healthRoutes(ctx);
      workspaceRoutes(ctx);
      deploymentRoutes(ctx);
      revisionRoutes(ctx);
      tracingProjectRoutes(ctx);
      projectLogRoutes(ctx);
      uploadRoutes(ctx);
    },
    workers: [uploads, uploadSweep],
  };
}
