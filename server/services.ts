import type { Config } from './config.ts';
import { SandboxDataPlane } from './dataplane/sandbox.ts';
import type { DataPlane } from './dataplane/types.ts';
import type { AuditLog } from './domain/audit.ts';
import { Auth } from './domain/auth.ts';
import { AuthThrottle } from './domain/auth-throttle.ts';
import { Deployments } from './domain/deployments.ts';
import { InstallationRepos } from './domain/installation-repos.ts';
import { Integrations } from './domain/integrations.ts';
import { Listeners } from './domain/listeners.ts';
import { Pipeline } from './domain/pipeline.ts';
import { Readiness } from './domain/readiness.ts';
import { Revisions } from './domain/revisions.ts';
import { TracingProjects } from './domain/tracing-projects.ts';
import type { Uploads } from './domain/uploads.ts';
import type { Clock } from './lib/clock.ts';
import { RevisionWatch } from './lib/revision-watch.ts';
import type { Logger } from './logger.ts';
import type { Metrics } from './metrics.ts';
import type { InstallationRepoStore } from './store/installation-repos.ts';
import type { RevisionRecord, Store } from './store/types.ts';
import type { Tracing } from './tracing.ts';

export type ServiceDeps = {
  store: Store;
  clock: Clock;
  log: Logger;
  config: Pick<
    Config,
    | 'SANDBOX_STAGE_MS'
    | 'DEPLOYMENT_DOMAIN'
    | 'ALLOW_FILE_REPO_URLS'
    | 'REGISTRY_URL'
    | 'REGISTRY_PUSH_TOKEN'
    | 'AUTH_FAILURE_BURST'
    | 'AUTH_FAILURES_PER_MINUTE'
    | 'AUTH_THROTTLE_ADDRESSES'
    | 'PIPELINE_LEASE_MS'
  > &
    Partial<Pick<Config, 'GITHUB_APP_ID' | 'GITHUB_URL'>>;
  /** This server process among those sharing the database: what its leases on work name. */
  processId: string;
  /** Uploaded source tarballs of `internal_source` deployments. */
  uploads: Uploads;
  installationRepos: InstallationRepoStore;
  /** Replaces the built-in sandbox (tests, or a future remote data plane). */
  sandbox?: DataPlane;
  /** The data plane of `local` and `k8s` listeners (the listener-agent protocol). */
  listenerAgent: DataPlane;
  /** The revisions' long-poll wake-ups; the control plane gives one shared with the other processes. */
  watch?: RevisionWatch;
  /** The audit log: what reads it back and records what no change's transaction carried. */
  audit: AuditLog;
  /** This process's metrics (`/metrics` on the health port). */
  metrics: Metrics;
  /** Spans exported when OTEL_EXPORTER_OTLP_ENDPOINT is set; undefined: tracing is off. */
  tracing?: Tracing;
};

export type Services = ReturnType<typeof createServices>;

/** Wires the domain services from their dependencies; starts nothing. */
export function createServices(deps: ServiceDeps) {
  const { store, clock, log } = deps;
  const watch = deps.watch ?? new RevisionWatch();
  const readiness = new Readiness({ probe: () => store.probeWrite() });
  const pipeline = new Pipeline({
    store,
    clock,
    log,
    watch,
    readiness,
    sandbox:
      deps.sandbox ??
      new SandboxDataPlane({
        stageMs: deps.config.SANDBOX_STAGE_MS,
        log,
        openUpload: (deploymentId, objectPath) => deps.uploads.open(deploymentId, objectPath),
      }),
    listenerAgent: deps.listenerAgent,
    processId: deps.processId,
    leaseMs: deps.config.PIPELINE_LEASE_MS,
    observer: revisionObserver(deps.metrics, deps.tracing, store),
  });
  return {
    store,
    clock,
    log,
    watch,
    pipeline,
    readiness,
    audit: deps.audit,
    metrics: deps.metrics,
    tracing: deps.tracing,
    auth: new Auth({
      store,
      clock,
      throttle: new AuthThrottle({
        burst: deps.config.AUTH_FAILURE_BURST,
        perMinute: deps.config.AUTH_FAILURES_PER_MINUTE,
        maxAddresses: deps.config.AUTH_THROTTLE_ADDRESSES,
      }),
    }),
    deployments: new Deployments({
      store,
      clock,
      pipeline,
      deploymentDomain: deps.config.DEPLOYMENT_DOMAIN,
      allowFileRepoUrls: deps.config.ALLOW_FILE_REPO_URLS,
      githubUrl: deps.config.GITHUB_URL,
      tarballUploaded: (deploymentId, objectPath) => deps.uploads.isUploaded(deploymentId, objectPath),
    }),
    uploads: deps.uploads,
    installationRepos: new InstallationRepos({ store, repos: deps.installationRepos, clock, webUrl: deps.config.GITHUB_URL ?? 'https://github.com' }),
    registry: { REGISTRY_URL: deps.config.REGISTRY_URL, REGISTRY_PUSH_TOKEN: deps.config.REGISTRY_PUSH_TOKEN },
    revisions: new Revisions({ store, watch }),
    listeners: new Listeners({ store, clock }),
    integrations: new Integrations({ store, clock, provenLinksOnly: deps.config.GITHUB_APP_ID !== undefined }),
    tracingProjects: new TracingProjects({ store }),
  };
}

/**
 * What the pipeline tells of each stage change: the metrics, and with tracing on a span under the
 * trace context stored with the revision (one read by its key, made only when tracing is on).
 */
function revisionObserver(metrics: Metrics, tracing: Tracing | undefined, store: Store): { revisionChanged(revision: RevisionRecord): void } {
  if (!tracing) return metrics;
  return {
    revisionChanged(revision) {
      metrics.revisionChanged(revision);
      store.revisionTraceparent(revision.id).then(
        (traceparent) => tracing.revisionChanged(revision, traceparent ?? undefined),
        () => tracing.revisionChanged(revision, undefined),
      );
    },
  };
}
