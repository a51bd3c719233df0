import type { Hono } from 'hono';
import { createApp } from './app.ts';
import type { Config } from './config.ts';
import { createConsole } from './console/console.ts';
import type { SecretBox } from './crypto/secret-box.ts';
import { AuditLog } from './domain/audit.ts';
import type { IssuerFetch } from './domain/github-oidc/issuer-keys.ts';
import { createOAuth } from './domain/oauth/oauth.ts';
import type { Resolve } from './domain/oauth/outbound.ts';
import { SharedWatch } from './domain/shared-watch.ts';
import { Uploads } from './domain/uploads.ts';
import { createOutgoingEvents } from './features/event-subscriptions.ts';
import { createGithubApp } from './features/github-app.ts';
import { createGithubActionsOidc } from './features/keyless-ci.ts';
import { createListenerAgents } from './features/listener-agents.ts';
import { createGithubWebhooks } from './features/webhooks.ts';
import { ManifestFlow } from './github/manifest-flow.ts';
import type { AppEnv, RouteContext } from './http/env.ts';
import type { Clock } from './lib/clock.ts';
import { sweepLoop } from './lib/poll-loop.ts';
import type { Logger } from './logger.ts';
import { Metrics } from './metrics.ts';
import { githubManifestRoutes } from './routes/github-manifest.ts';
import { oauthRoutes } from './routes/oauth.ts';
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
};

export type ControlPlane = {
  services: Services;
  app: Hono<AppEnv>;
  /** Resumes the pipeline and starts background workers. */
  start(): Promise<void>;
  /** Stops timers and workers; the database keeps what they were doing. */
  stop(): void;
  /** After `stop()` on a clean shutdown: hands this process's work to the others now rather than a lease later. */
  releaseWork(): Promise<void>;
};

/**
 * Everything the server runs, wired from its dependencies: services, HTTP routes, background
 * work. The real server and the in-process test app both come from here, so a feature is wired
 * once. Features beyond the core API add their routes, public paths and workers below.
 */
export function createControlPlane(deps: ControlPlaneDeps): ControlPlane {
  const processId = deps.processId ?? crypto.randomUUID();
  // What one process learns, every process on the database learns: long-poll wake-ups
  // and key revocations are published; SQLite's coordination does nothing (one process).
  const { coordination } = deps.backend;
  const revisionWatch = new SharedWatch(coordination, TOPICS.revision);
  const flowWatch = new SharedWatch(coordination, TOPICS.oauthFlow);
  const listenerAgents = createListenerAgents({ agents: deps.backend.agents, coordination, clock: deps.clock, log: deps.log, config: deps.config });
  // Source tarballs of internal_source deployments: the signed PUT takes no API key.
  const uploads = new Uploads({
    store: deps.backend.uploads,
    clock: deps.clock,
    log: deps.log,
    signingKey: deps.secretBox.deriveKey('upload-url'),
    publicUrl: deps.publicUrl,
    ttlMs: deps.config.UPLOAD_URL_TTL_SECONDS * 1000,
    maxBytes: deps.config.UPLOAD_MAX_BYTES,
    workspaceQuotaBytes: deps.config.UPLOAD_WORKSPACE_QUOTA_BYTES,
    processId,
    leaseMs: deps.config.PIPELINE_LEASE_MS,
  });
  const installationRepos = deps.backend.installationRepos;
  // The audit log's entries are written by the stores with each change; this reads and retains them.
  const audit = new AuditLog({
    store: deps.backend.audit,
    clock: deps.clock,
    log: deps.log,
    retentionDays: deps.config.AUDIT_RETENTION_DAYS,
    lead: () => coordination.tryLead('audit-retention'),
  });
  const services = createServices({
    audit,
    metrics: deps.metrics ?? new Metrics(deps.backend.clusterReadings),
    store: deps.backend.core,
    clock: deps.clock,
    log: deps.log,
    config: deps.config,
    listenerAgent: listenerAgents.plane,
    uploads,
    installationRepos,
    watch: revisionWatch,
    processId,
    tracing: deps.tracer,
  });
  const { auth } = services;
  const detach = [
    () => revisionWatch.detach(),
    () => flowWatch.detach(),
    coordination.subscribe(TOPICS.apiKeyRevoked, (keyId) => auth.invalidateKey(keyId)),
    coordination.onResync(() => auth.invalidateAll()),
  ];
  // A revoke answers once every other listening process has dropped the key (acknowledged), not
  // merely once the notice is sent: PostgreSQL delivers it at commit, but the other process may
  // read the client's next request before it reads the notice from its listening connection.
  // While this process's listening connection is down, keys are not cached (read on every request).
  auth.sharedWith({ announceRevoked: (keyId) => coordination.publishAcknowledged(TOPICS.apiKeyRevoked, keyId), listening: () => coordination.listening });
  const extraRoutes: Array<(ctx: RouteContext) => void> = [];
  const workers: Array<{ start(): Promise<void> | void; stop(): void }> = [
    uploads,
    uploadSweeper(uploads, deps.config.UPLOAD_URL_TTL_SECONDS * 1000, deps.log),
    audit,
  ];

  // The GitHub App (contract §12): proven installation links and installation tokens; null without App settings.
  const githubApp = createGithubApp({
    config: deps.config,
    store: deps.backend.core,
    github: deps.backend.github,
    secretBox: deps.secretBox,
    clock: deps.clock,
    log: deps.log,
    publicUrl: deps.publicUrl,
    leadSender: () => coordination.tryLead('github-status-outbox'),
    metrics: services.metrics,
    tracing: services.tracing,
  });
  if (githubApp) {
    extraRoutes.push(githubApp.routes);
    workers.push(githubApp.sender);
  }

  // Creating the GitHub App from its manifest: available with or without App settings (it makes them).
  const manifestFlow = new ManifestFlow({
    store: deps.backend.github,
    secretBox: deps.secretBox,
    clock: deps.clock,
    log: deps.log,
    config: deps.config,
    publicUrl: deps.publicUrl,
  });
  extraRoutes.push((ctx) => githubManifestRoutes(ctx, manifestFlow, deps.config.GITHUB_URL));

  // GitHub push webhooks: signature-checked intake, delivery worker, branch-head reconciler.
  const github = createGithubWebhooks({
    repoAccess: githubApp?.repoAccess,
    githubUrl: githubApp?.app.webUrl,
    previews: githubApp
      ? {
          github: deps.backend.github,
          refuse: (parent, sha, context, description) => githubApp.sender.postRefusal(parent, sha, context, description),
          sweepMs: deps.config.PREVIEW_SWEEP_MS,
          lead: () => coordination.tryLead('preview-sweeper'),
        }
      : undefined,
    services,
    webhooks: deps.backend.webhooks,
    webhookSecrets: deps.backend.webhookSecrets,
    secretBox: deps.secretBox,
    publicUrl: deps.publicUrl,
    config: deps.config,
    processId,
    // The reconciler's passes run in one process at a time (a session advisory lock on PostgreSQL).
    leadReconciler: () => coordination.tryLead('reconciler'),
  });
  extraRoutes.push(github.routes);
  workers.push(github.worker, github.reconciler, github.previewSweeper);

  // OAuth helper: providers, authenticate, wait; the callback is checked by its state, not a key.
  const oauth = createOAuth({
    store: deps.backend.oauth,
    secretBox: deps.secretBox,
    clock: deps.clock,
    log: deps.log,
    publicUrl: deps.publicUrl,
    allowedHosts: deps.config.OAUTH_ALLOWED_HOSTS,
    resolve: deps.oauthResolve,
    watch: flowWatch,
    exclusive: (name, work) => coordination.exclusive(name, work),
  });
  extraRoutes.push((ctx) => oauthRoutes(ctx, oauth));

  // Outgoing events: workspaces' subscriptions, and the sender of the outbox the triggers fill.
  const outgoingEvents = createOutgoingEvents({
    store: deps.backend.events,
    secretBox: deps.secretBox,
    clock: deps.clock,
    log: deps.log,
    config: deps.config,
    resolve: deps.oauthResolve,
    lead: () => coordination.tryLead('event-outbox'),
  });
  extraRoutes.push(outgoingEvents.routes);
  workers.push(outgoingEvents.sender);

  // Listener agents: agent tokens, the agent protocol, the workspace's default listener.
  const agents = listenerAgents.attach(services, { repoAccess: githubApp?.repoAccess });
  extraRoutes.push(agents.routes);
  workers.push(agents.worker);

  // Keyless CI: trust entries per workspace, and the exchange of an Actions ID token (which takes no key).
  const githubOidc = createGithubActionsOidc({
    store: deps.backend.core,
    trust: deps.backend.githubTrust,
    clock: deps.clock,
    log: deps.log,
    config: deps.config,
    publicUrl: deps.publicUrl,
    issuerFetch: deps.issuerFetch,
  });
  extraRoutes.push(githubOidc.routes);

  // The web console: pages under /console with their own session cookies, and browsers' links into them.
  const webConsole = createConsole({
    services,
    store: deps.backend.console,
    trust: githubOidc.entries,
    log: deps.log,
    config: deps.config,
    publicUrl: deps.publicUrl,
  });
  extraRoutes.push(webConsole.routes);
  workers.push(webConsole.worker);

  const app = createApp(services, {
    extraRoutes,
    publicUrl: deps.publicUrl,
    inflightBodyBytes: deps.config.WEBHOOK_INFLIGHT_BYTES,
    beforeAuth: [webConsole.beforeAuth],

    tracer: deps.tracer,
  });
  return {
    services,
    app,
    async start() {
      await services.pipeline.resume();
      for (const worker of workers) await worker.start();
    },
    stop() {
      for (const worker of workers) worker.stop();
      services.pipeline.stop();
      for (const stop of detach.splice(0)) stop();
    },
    async releaseWork() {
      await services.pipeline
        .releaseLeases()
        .catch((error: unknown) =>
          deps.log.warn('could not hand work back at shutdown; other processes take it over once its leases pass', { error: String(error) }),
        );
    },
  };
}

/** Sweeps stale uploads once a URL lifetime, so tarballs nobody used do not wait for their deployment's next upload to go. */
function uploadSweeper(uploads: Uploads, everyMs: number, log: Logger): { start(): void; stop(): void } {
  return sweepLoop({
    sweep: () => uploads.sweep(),
    everyMs,
    onRemoved: (removed) => log.info('uploads: removed stale tarballs and expired URLs', { removed }),
    onError: (error) => log.warn('uploads: the sweep failed; it runs again later', { error: String(error) }),
  });
}
