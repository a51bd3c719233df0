import type { Config } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { CheckRunRerun } from '../domain/webhooks/check-run-rerun.ts';
import { DeliveryLog } from '../domain/webhooks/delivery-log.ts';
import { DeliveryWorker } from '../domain/webhooks/delivery-worker.ts';
import { WEBHOOK_PATH, WebhookIntake } from '../domain/webhooks/intake.ts';
import { type PreviewRefusal, Previews } from '../domain/webhooks/previews.ts';
import { DeliveryProcessor } from '../domain/webhooks/process-delivery.ts';
import { PushBuilds } from '../domain/webhooks/push-builds.ts';
import { Reconciler } from '../domain/webhooks/reconciler.ts';
import { WorkspaceWebhookSecrets } from '../domain/webhooks/workspace-secrets.ts';
import { type BranchHeadReader, lsRemoteBranchHead } from '../git/ls-remote.ts';
import type { RepoAccess } from '../github/repo-access.ts';
import type { RouteContext } from '../http/env.ts';
import { sweepLoop } from '../lib/poll-loop.ts';
import { webhookRoutes } from '../routes/webhooks.ts';
import type { Services } from '../services.ts';
import type { GithubStore } from '../store/github.ts';
import type { WebhookSecretStore } from '../store/webhook-secrets.ts';
import type { WebhookStore } from '../store/webhooks.ts';

/**
 * The GitHub push feature, wired from the control plane's services: the signature-checked
 * endpoint and delivery log, the worker that turns stored deliveries into revisions, and the
 * reconciler that catches pushes no webhook reported.
 */
export function createGithubWebhooks(deps: {
  services: Services;
  webhooks: WebhookStore;
  webhookSecrets: WebhookSecretStore;
  /** Encrypts the workspaces' webhook secrets at rest. */
  secretBox: SecretBox;
  /** The address GitHub reaches this server at (the workspaces' Payload URLs). */
  publicUrl: () => string;
  config: Pick<
    Config,
    | 'GITHUB_WEBHOOK_SECRET'
    | 'GITHUB_WEBHOOK_SECRET_PREVIOUS'
    | 'RECONCILE_INTERVAL_MS'
    | 'RECONCILE_ALLOWED_HOSTS'
    | 'RECONCILE_CONCURRENCY'
    | 'RECONCILE_TIMEOUT_MS'
    | 'ALLOW_FILE_REPO_URLS'
    | 'WEBHOOK_PROCESS_DELAY_MS'
    | 'PIPELINE_LEASE_MS'
  >;
  readHead?: BranchHeadReader;
  /** Whether this process runs the reconciler now (one process at a time on one database). */
  leadReconciler?: () => Promise<boolean>;
  /** This server process: the owner its delivery claims name. */
  processId: string;
  /** Installation tokens for private repositories on the GitHub App's host (with App settings). */
  repoAccess?: RepoAccess;
  /** The GitHub App's host (`GITHUB_URL`): the reconciler reads it whatever RECONCILE_ALLOWED_HOSTS says. */
  githubUrl?: string;
  /** Pull-request previews (with GitHub App settings): their storage, how a refusal is told, the sweep. */
  previews?: { github: GithubStore; refuse: PreviewRefusal; sweepMs: number; lead?: () => Promise<boolean> };
}) {
  const { services, config } = deps;
  const { store, clock, log, pipeline } = services;
  const webhookStore = deps.webhooks;
  const builds = new PushBuilds({ store, pipeline, clock, log });
  const previews = deps.previews
    ? new Previews({ store, deployments: services.deployments, builds, github: deps.previews.github, clock, log, refuse: deps.previews.refuse })
    : undefined;
  const worker = new DeliveryWorker({
    webhookStore,
    processor: new DeliveryProcessor({
      store,
      builds,
      clock,
      heads: webhookStore,
      installations: webhookStore,
      repos: services.installationRepos,
      previews,
      // Re-runs come from check runs, which only a GitHub App makes.
      rerun: deps.previews ? new CheckRunRerun({ store, deployments: services.deployments, installations: webhookStore }) : undefined,
    }),
    clock,
    log,
    delayMs: config.WEBHOOK_PROCESS_DELAY_MS,
    processId: deps.processId,
    leaseMs: config.PIPELINE_LEASE_MS,
    observer: services.metrics,
    tracing: services.tracing,
  });
  const workspaceSecrets = new WorkspaceWebhookSecrets({
    store: deps.webhookSecrets,
    secretBox: deps.secretBox,
    clock,
    log,
    payloadUrl: (tenantId) => `${deps.publicUrl()}${WEBHOOK_PATH}/workspaces/${tenantId}`,
  });
  const intake = new WebhookIntake({
    workspaceSecrets,
    secret: config.GITHUB_WEBHOOK_SECRET,
    previousSecrets: (config.GITHUB_WEBHOOK_SECRET_PREVIOUS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s.length > 0),
    store: webhookStore,
    clock,
    log,
    onStored: () => worker.kick(),
  });
  const reconciler = new Reconciler({
    store,
    webhookStore,
    builds,
    readHead: deps.readHead ?? lsRemoteBranchHead({ timeoutMs: config.RECONCILE_TIMEOUT_MS, allowFile: config.ALLOW_FILE_REPO_URLS }),
    policy: { allowedHosts: config.RECONCILE_ALLOWED_HOSTS, allowFileUrls: config.ALLOW_FILE_REPO_URLS, githubUrl: deps.githubUrl },
    repoAccess: deps.repoAccess,
    concurrency: config.RECONCILE_CONCURRENCY,
    clock,
    log,
    intervalMs: config.RECONCILE_INTERVAL_MS,
    lead: deps.leadReconciler,
  });
  const deliveryLog = new DeliveryLog(webhookStore);
  return {
    worker,
    reconciler,
    /** Tears down idle previews and those of deleted parents (nothing to do without previews). */
    previewSweeper: previewSweeper(previews, deps.previews, log),
    routes: (ctx: RouteContext) => webhookRoutes(ctx, { intake, log: deliveryLog, secrets: workspaceSecrets }),
    /** Only the delivery endpoints skip the API key (they check a signature); the secret and the log need one. */
  };
}

/** Runs the preview sweep every `sweepMs` in the process that leads it. */
function previewSweeper(previews: Previews | undefined, settings: { sweepMs: number; lead?: () => Promise<boolean> } | undefined, log: Services['log']) {
  if (!previews || !settings) return { start() {}, stop() {} };
  return sweepLoop({
    sweep: () => previews.sweep(),
    everyMs: settings.sweepMs,
    lead: settings.lead,
    onRemoved: (removed) => log.info('previews: swept previews', { removed }),
    onError: (error) => log.warn('previews: the sweep failed; it runs again later', { error: String(error) }),
  });
}
