import type { Hono, MiddlewareHandler } from 'hono';
import { createApp } from './app.ts';
import type { Config } from './config.ts';
import { consoleFeature } from './console/console.ts';
import type { SecretBox } from './crypto/secret-box.ts';
import type { IssuerFetch } from './domain/github-oidc/issuer-keys.ts';
import type { Resolve } from './domain/oauth/outbound.ts';
import { SharedWatch } from './domain/shared-watch.ts';
import { auditEventsFeature } from './features/audit-events.ts';
import { deploymentsFeature } from './features/deployments.ts';
import { eventSubscriptionsFeature } from './features/event-subscriptions.ts';
import type { Feature } from './features/feature.ts';
import { githubAppFeature } from './features/github-app.ts';
import { keylessCiFeature } from './features/keyless-ci.ts';
import { listenerAgentPlane, listenerAgentsFeature } from './features/listener-agents.ts';
import { oauthFeature } from './features/oauth.ts';
import { webhooksFeature } from './features/webhooks.ts';
import type { AppEnv } from './http/env.ts';
import type { Clock } from './lib/clock.ts';
import type { Logger } from './logger.ts';
import { Metrics } from './metrics.ts';
import { createServices, type Services } from './services.ts';
import type { StoreBackend } from './store/backend.ts';
import { TOPICS } from './store/coordination.ts';
import type { Tracing } from './tracing.ts';

export type ControlPlaneDeps = {
  /** The database, whichever backend: the wiring takes each store from it, never a handle. */
  backend: StoreBackend;
  clock: Clock;
  log: Logger;
  config: Config;
  /** Encrypts values kept at rest (secrets, client secrets, tokens). */
  secretBox: SecretBox;
  /** The address the outside world reaches this server at (known once it listens). */
  publicUrl: () => string;
  /** Name resolution for OAuth provider hosts (tests inject a hostile resolver); the system's by default. */
  oauthResolve?: Resolve;
  /** How the GitHub OIDC issuer is read (tests count the reads); the system's `fetch` by default. */
  issuerFetch?: IssuerFetch;
  /**
   * This server process among those sharing the database: the owner its leases on work name
   * (revisions, teardowns, webhook deliveries, uploads). A new one per control plane by default.
   */
  processId?: string;
  /** The process's metrics; its own set by default (tests that build several control planes in one process). */
  metrics?: Metrics;
  /** Spans of requests, exported when OTEL_EXPORTER_OTLP_ENDPOINT is set (`startTracing`). */
  tracer?: Tracing;
  /** In place of the request observation middleware (`createApp`'s option): bench/observability-cost.ts only. */
  observeRequests?: MiddlewareHandler<AppEnv>;
};

export type ControlPlane = {
  services: Services;
  app: Hono<AppEnv>;
  /** The features composed, in the order their routes are registered and their workers started. */
  features: readonly Feature[];
  /** Resumes the pipeline, then starts the features' workers. */
  start(): Promise<void>;
  /** Stops the features' workers, then the pipeline; the database keeps what they were doing. */
  stop(): void;
  /** After `stop()` on a clean shutdown: hands this process's work to the others now rather than a lease later. */
  releaseWork(): Promise<void>;
};

/**
 * Everything the server runs, composed from its features: the domain services every route is
 * handed (`services.ts`: auth, the pipeline, deployments, revisions…), then each feature with the
 * slices of the store it uses, its routes and its workers. The real server and the in-process test
 * app both come from here, so a feature is wired once.
 */
export function createControlPlane(deps: ControlPlaneDeps): ControlPlane {
  const { backend, clock, log, config, secretBox, publicUrl } = deps;
  const processId = deps.processId ?? crypto.randomUUID();
  // What one process learns, every process on the database learns: long-poll wake-ups
  // and key revocations are published; SQLite's coordination does nothing (one process).
  const { coordination } = backend;
  const revisionWatch = new SharedWatch(coordination, TOPICS.revision);
  const lead = (name: string) => () => coordination.tryLead(name);

  // The features the domain services are built from: the audit log they record through, the uploads
  // the sandbox reads, and the listener agents' data plane the pipeline hands local and k8s work to.
  const audit = auditEventsFeature({ store: backend.audit, clock, log, config, lead: lead('audit-retention') });
  const deployments = deploymentsFeature({ uploads: backend.uploads, clock, log, config, secretBox, publicUrl, processId });
  const agentPlane = listenerAgentPlane({ agents: backend.agents, coordination, clock, log, config });
  const services = createServices({
    audit: audit.log,
    metrics: deps.metrics ?? new Metrics(backend.clusterReadings),
    store: backend.core,
    clock,
    log,
    config,
    listenerAgent: agentPlane.plane,
    uploads: deployments.uploads,
    installationRepos: backend.installationRepos,
    watch: revisionWatch,
    processId,
    tracing: deps.tracer,
  });
  const { auth, pipeline } = services;
  const detach = [
    () => revisionWatch.detach(),
    coordination.subscribe(TOPICS.apiKeyRevoked, (keyId) => auth.invalidateKey(keyId)),
    coordination.onResync(() => auth.invalidateAll()),
  ];
  // A revoke answers once every other listening process has dropped the key (acknowledged), not
  // merely once the notice is sent: PostgreSQL delivers it at commit, but the other process may
  // read the client's next request before it reads the notice from its listening connection.
  // While this process's listening connection is down, keys are not cached (read on every request).
  auth.sharedWith({ announceRevoked: (keyId) => coordination.publishAcknowledged(TOPICS.apiKeyRevoked, keyId), listening: () => coordination.listening });

  const github = githubAppFeature({
    config,
    store: backend.core,
    github: backend.github,
    secretBox,
    clock,
    log,
    publicUrl,
    leadSender: lead('github-status-outbox'),
    metrics: services.metrics,
    tracing: services.tracing,
  });
  const githubApp = github.app;
  const keylessCi = keylessCiFeature({ store: backend.core, trust: backend.githubTrust, clock, log, config, publicUrl, issuerFetch: deps.issuerFetch });
  // In the order their routes are registered and their workers started (a route's place decides which of two matching routes answers).
  const features: Feature[] = [
    deployments,
    audit,
    github,
    webhooksFeature({
      store: backend.core,
      pipeline,
      deployments: services.deployments,
      installationRepos: services.installationRepos,
      clock,
      log,
      metrics: services.metrics,
      tracing: services.tracing,
      repoAccess: githubApp?.repoAccess,
      githubUrl: githubApp?.webUrl,
      previews: githubApp
        ? {
            github: backend.github,
            refuse: (parent, sha, context, description) => githubApp.sender.postRefusal(parent, sha, context, description),
            sweepMs: config.PREVIEW_SWEEP_MS,
            lead: lead('preview-sweeper'),
          }
        : undefined,
      webhooks: backend.webhooks,
      webhookSecrets: backend.webhookSecrets,
      secretBox,
      publicUrl,
      config,
      processId,
      // The reconciler's passes run in one process at a time (a session advisory lock on PostgreSQL).
      leadReconciler: lead('reconciler'),
    }),
    oauthFeature({ store: backend.oauth, coordination, secretBox, clock, log, publicUrl, config, resolve: deps.oauthResolve }),
    eventSubscriptionsFeature({ store: backend.events, secretBox, clock, log, config, resolve: deps.oauthResolve, lead: lead('event-outbox') }),
    listenerAgentsFeature({
      agentPlane,
      store: backend.core,
      agents: backend.agents,
      pipeline,
      uploads: deployments.uploads,
      coordination,
      clock,
      log,
      config,
      repoAccess: githubApp?.repoAccess,
    }),
    keylessCi,
    consoleFeature({ auth, audit: audit.log, clock, store: backend.console, trust: keylessCi.entries, log, config, publicUrl }),
  ];
  const workers = features.flatMap((feature) => feature.workers);

  const app = createApp(services, {
    features,
    publicUrl,
    inflightBodyBytes: config.WEBHOOK_INFLIGHT_BYTES,
    tracer: deps.tracer,
    observeRequests: deps.observeRequests,
  });
  return {
    services,
    app,
    features,
    async start() {
      await pipeline.resume();
      for (const worker of workers) await worker.start();
    },
    stop() {
      for (const worker of workers) worker.stop();
      pipeline.stop();
      for (const stop of detach.splice(0)) stop();
    },
    async releaseWork() {
      await pipeline
        .releaseLeases()
        .catch((error: unknown) =>
          log.warn('could not hand work back at shutdown; other processes take it over once its leases pass', { error: String(error) }),
        );
    },
  };
}
