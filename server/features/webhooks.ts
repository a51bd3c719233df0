import type { Config } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Deployments } from '../domain/deployments.ts';
import type { InstallationRepos } from '../domain/installation-repos.ts';
import type { Pipeline } from '../domain/pipeline.ts';
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
import type { Clock } from '../lib/clock.ts';
import { sweepLoop } from '../lib/poll-loop.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { webhookRoutes } from '../routes/webhooks.ts';
import type { GithubStore } from '../store/github.ts';
import type { WebhookSecretStore } from '../store/webhook-secrets.ts';
import type { WebhookStore } from '../store/webhooks.ts';
import type { Tracing } from '../tracing.ts';
import type { Feature, StoreSliceOf, Worker } from './feature.ts';

/** The core tables as the push feature reads and writes them: each class's own slice, together. */
export type WebhooksStore = StoreSliceOf<typeof PushBuilds> &
  StoreSliceOf<typeof Previews> &
  StoreSliceOf<typeof DeliveryProcessor> &
  StoreSliceOf<typeof CheckRunRerun> &
  StoreSliceOf<typeof Reconciler>;

/**
 * GitHub webhooks (contract §§7, 12): the signature-checked endpoints and delivery log, the worker
 * that turns stored deliveries into revisions, the reconciler that catches pushes no webhook
 * reported, and with GitHub App settings the pull-request previews and their sweep.
 */
export function webhooksFeature(deps: {
  store: WebhooksStore;
  pipeline: Pipeline;
  deployments: Deployments;
  installationRepos: InstallationRepos;
  clock: Clock;
  log: Logger;
  /** Counts deliveries (`observer`); spans for them when tracing is on. */
  metrics: Metrics;
  tracing?: Tracing;
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
}): Feature {
  const { config, store, clock, log, pipeline } = deps;
  const webhookStore = deps.webhooks;
  const builds = new PushBuilds({ store, pipeline, clock, log });
  const previews = deps.previews
    ? new Previews({ store, deployments: deps.deployments, builds, github: deps.previews.github, clock, log, refuse: deps.previews.refuse })
    : undefined;
  const worker = new DeliveryWorker({
    webhookStore,
    processor: new DeliveryProcessor({
      store,
      builds,
      clock,
      heads: webhookStore,
      installations: webhookStore,
      repos: deps.installationRepos,
      previews,
      // Re-runs come from check runs, which only a GitHub App makes.
      rerun: deps.previews ? new CheckRunRerun({ store, deployments: deps.deployments, installations: webhookStore }) : undefined,
    }),
    clock,
    log,
    delayMs: config.WEBHOOK_PROCESS_DELAY_MS,
    processId: deps.processId,
    leaseMs: config.PIPELINE_LEASE_MS,
    observer: deps.metrics,
    tracing: deps.tracing,
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
    name: 'webhooks',
    // Only the delivery endpoints skip the API key (they check a signature); the secret and the log need one.
    routes: (ctx) => webhookRoutes(ctx, { intake, log: deliveryLog, secrets: workspaceSecrets }),
    // The preview sweep tears down idle previews and those of deleted parents (none without previews).
    workers: previews && deps.previews ? [worker, reconciler, previewSweeper(previews, deps.previews, log)] : [worker, reconciler],
  };
}

/** Runs the preview sweep every `sweepMs` in the process that leads it. */
function previewSweeper(previews: Previews, settings: { sweepMs: number; lead?: () => Promise<boolean> }, log: Logger): Worker {
  return sweepLoop({
    sweep: () => previews.sweep(),
    everyMs: settings.sweepMs,
    lead: settings.lead,
    onRemoved: (removed) => log.info('previews: swept previews', { removed }),
    onError: (error) => log.warn('previews: the sweep failed; it runs again later', { error: String(error) }),
  });
}
