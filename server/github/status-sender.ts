import { isTerminal, type RevisionStatus } from '../../shared/schemas/revision.ts';
import type { Clock } from '../lib/clock.ts';
import { PolledWorker } from '../lib/poll-loop.ts';
import type { Logger } from '../logger.ts';
import type { GithubDeploymentRecord, GithubStore, OutboxEvent } from '../store/github.ts';
import type { DeploymentRecord, RevisionRecord, Store } from '../store/types.ts';
import type { GithubApp } from './app-settings.ts';
import type { GithubApi } from './github-api.ts';
import type { GithubPace } from './github-pace.ts';
import type { InstallationPermissions } from './installation-permissions.ts';
import type { InstallationTokens } from './installation-tokens.ts';
import { StatusCalls, TryLater, WaitsItsTurn } from './status-calls.ts';
import { sendCheckRun } from './status-check-run.ts';
import { describe, githubEnvironmentOf, planFor, postedDeploymentState, type StatusPlan } from './status-plan.ts';
import { type Target, targetOf, targetOfRecord } from './status-target.ts';

/** The console's page of one revision (contract §16): what a browser opens from GitHub's Details and log links. */
export function revisionPageUrl(publicUrl: string, deploymentId: string, revisionId: string): string {
  return `${publicUrl}/console/deployments/${encodeURIComponent(deploymentId)}/revisions/${encodeURIComponent(revisionId)}`;
}

/** How long an event waits for its revision's commit to become known before it is given up. */
const COMMIT_WAIT_MS = 15 * 60_000;
/** Events looked at per pass (each of a different revision). */
const BATCH = 50;
/** Sent events are kept this long (to look into), then pruned, with expired setup states. */
const KEEP_SENT_MS = 7 * 24 * 3_600_000;
const PRUNE_EVERY_MS = 3_600_000;

export type StatusSenderDeps = {
  app: GithubApp;
  api: GithubApi;
  tokens: InstallationTokens;
  store: Pick<Store, 'getRevisionById' | 'getDeploymentById' | 'getIntegrationById' | 'searchLogs'>;
  /** Whether an installation grants `checks: write`: check runs then replace commit statuses. */
  permissions: InstallationPermissions;
  github: GithubStore;
  pace: GithubPace;
  clock: Clock;
  log: Logger;
  /** The control plane's public address: each status links to the revision's build log there. */
  publicUrl: () => string;
  /** Whether this process sends now: one process at a time on one database (always true on SQLite). */
  lead?: () => Promise<boolean>;
  pollMs?: number;
};

/**
 * Sends the status outbox to GitHub (contract §12). The triggers of migration 014 write one event
 * per revision change in the very transaction of the change; this sends them in order per
 * revision (a revision's next event waits until its earlier one is through), one process at a
 * time, under one pace for all content-creating calls. Every (revision, call, state) accepted
 * is recorded, so the same state is never posted twice; a call cut off by a crash is checked
 * against GitHub's own list before it is made again. 5xx, timeouts and rate limits are retried
 * with backoff (waiting out `Retry-After` / `x-ratelimit-reset`); a 422 "maximum number of
 * statuses" is logged and dropped.
 */
export class GithubStatusSender extends PolledWorker {
  readonly #deps: StatusSenderDeps;
  readonly #calls: StatusCalls;
  #draining: Promise<number> | null = null;
  #prunedAt = 0;

  constructor(deps: StatusSenderDeps) {
    super({
      intervalMs: deps.pollMs ?? 500,
      lead: deps.lead,
      onError: (error) => deps.log.error('github: the status outbox pass failed; it runs again', { error: String(error) }),
    });
    this.#deps = deps;
    this.#calls = new StatusCalls({ ...deps, stopped: () => this.stopped });
  }

  protected async pass(): Promise<void> {
    const now = Date.parse(this.#deps.clock.now());
    if (now - this.#prunedAt > PRUNE_EVERY_MS) {
      this.#prunedAt = now;
      await this.#deps.github.prune(new Date(now - KEEP_SENT_MS).toISOString(), new Date(now).toISOString());
    }
    // Drained until nothing is due, so a burst is sent at the pace rather than a batch per poll.
    while (!this.stopped && (await this.drain()) > 0);
  }

  /** One pass over the due events; answers how many it finished. */
  drain(): Promise<number> {
    this.#draining ??= this.#drainOnce().finally(() => (this.#draining = null));
    return this.#draining;
  }

  async #drainOnce(): Promise<number> {
    const { github, clock } = this.#deps;
    let finished = 0;
    for (const event of await github.dueEvents(clock.now(), BATCH)) {
      if (this.stopped) break;
      if (await this.#process(event)) finished += 1;
    }
    return finished;
  }

  /** Answers whether the event is through (sent, or nothing to send). */
  async #process(event: OutboxEvent): Promise<boolean> {
    const { github, clock, log } = this.#deps;
    const finish = async (outcome: string) => {
      await github.finishEvent(event.id, outcome, clock.now());
      return true;
    };
    try {
      if (event.event === 'DELETED') return finish(await this.#deleted(event));
      const [revision, deployment] = await Promise.all([
        this.#deps.store.getRevisionById(event.revision_id),
        this.#deps.store.getDeploymentById(event.deployment_id),
      ]);
      if (!revision || !deployment) return finish('the revision is gone');
      const target = await targetOf(deployment, this.#deps);
      if (!target) return finish("not a repository of a proven installation on the App's GitHub");
      const sha = revision.source_revision_config.repo_commit_sha;
      if (!sha) {
        // A revision built from a branch learns its commit once the agent checked it out.
        if (isTerminal(revision.status as RevisionStatus) || Date.parse(clock.now()) - Date.parse(event.created_at) > COMMIT_WAIT_MS)
          return finish('no commit to report on');
        await github.retryEvent(event.id, new Date(Date.parse(clock.now()) + 1000).toISOString(), 'waiting for the commit');
        return false;
      }
      const plan = planFor(event.event, revision.status_message);
      if (!plan) return finish('nothing to tell GitHub');
      await this.#send(event, revision, deployment, target, sha, plan);
      return finish('sent');
    } catch (error) {
      if (error instanceof WaitsItsTurn) {
        // Not a failure: no attempt counted and nothing logged (a burst queues hundreds this way).
        await github.retryEvent(event.id, new Date(error.untilMs).toISOString(), `paced: ${error.message}`, false);
        return false;
      }
      if (!(error instanceof TryLater)) throw error;
      // A rate limit says itself how long to wait; anything else backs off, up to 5 minutes.
      const backoff = error.untilMs === null ? Math.min(300_000, 1000 * 2 ** Math.min(event.attempts, 10)) * (0.5 + Math.random() / 2) : 0;
      const at = Math.max(Date.parse(clock.now()) + backoff, error.untilMs ?? 0);
      log.warn('github: a status could not be sent; it is tried again', {
        revision_id: event.revision_id,
        event: event.event,
        attempts: event.attempts + 1,
        retry_at: new Date(at).toISOString(),
        reason: error.message,
      });
      await github.retryEvent(event.id, new Date(at).toISOString(), `retry: ${error.message}`);
      return false;
    }
  }

  async #send(event: OutboxEvent, revision: RevisionRecord, deployment: DeploymentRecord, target: Target, sha: string, plan: StatusPlan): Promise<void> {
    const { github, publicUrl } = this.#deps;
    const logUrl = revisionPageUrl(publicUrl(), deployment.id, revision.id);
    const environmentUrl = deployment.source_config.custom_url ?? undefined;
    // A success that GitHub let mark the earlier deployments of its environment inactive itself.
    let inactivatedByGithub: GithubDeploymentRecord | null = null;
    if (plan.deployment) {
      const record = await this.#ensureDeployment(event, revision, deployment, target, sha, logUrl);
      const state = postedDeploymentState(plan, target.checks);
      if (record && state) {
        // GitHub's auto_inactive covers the earlier deployments of a non-transient, non-production environment.
        const { transient, production } = githubEnvironmentOf(deployment);
        const autoInactive = state === 'success' && !transient && !production;
        const body = {
          state,
          log_url: logUrl,
          description: plan.description,
          auto_inactive: autoInactive,
          ...(environmentUrl ? { environment_url: environmentUrl } : {}),
        };
        const posted = await this.#deploymentStatus(event, record, target, state, body);
        await github.setGithubDeploymentState(revision.id, state);
        if (posted && autoInactive) inactivatedByGithub = record;
      }
    }
    if (plan.check && target.checks)
      await sendCheckRun(
        { calls: this.#calls, github, store: this.#deps.store, clock: this.#deps.clock },
        { event, revision, deployment, target, sha, pageUrl: logUrl },
        plan,
      );
    if (plan.commit && !target.checks) {
      const context = `deploy/${deployment.name}`;
      const body = { state: plan.commit, target_url: logUrl, description: describe(plan.description), context };
      await this.#calls.once(event, target, {
        revisionId: revision.id,
        call: 'commit_status',
        state: plan.commit,
        request: { method: 'POST', path: `/repos/${target.path}/statuses/${sha}`, body },
        alreadyThere: () =>
          this.#calls.listed(target, `/repos/${target.path}/commits/${sha}/statuses?per_page=100`, (s) => s.context === context && s.state === plan.commit),
      });
    }
    if (plan.replacesOthers) {
      for (const other of await github.githubDeploymentsOf(deployment.id)) {
        if (other.revision_id === revision.id || other.last_state !== 'success') continue;
        if (inactivatedByGithub && sameEnvironment(other, inactivatedByGithub)) await github.setGithubDeploymentState(other.revision_id, 'inactive');
        else await this.#inactive(event, other, target);
      }
    }
  }

  /** A status of a GitHub deployment; answers whether GitHub has it. */
  #deploymentStatus(event: OutboxEvent, record: GithubDeploymentRecord, target: Target, state: string, body: Record<string, unknown>): Promise<boolean> {
    const statuses = `/repos/${target.path}/deployments/${record.github_deployment_id}/statuses`;
    return this.#calls.once(event, target, {
      revisionId: record.revision_id,
      call: 'deployment_status',
      state,
      request: { method: 'POST', path: statuses, body },
      alreadyThere: () => this.#calls.listed(target, `${statuses}?per_page=100`, (s) => s.state === state),
    });
  }

  /**
   * A commit status that says why a pull request got no preview (`max_concurrent`). Sent at once,
   * paced, not through the outbox: the webhook delivery that asked is itself stored and retried.
   */
  async postRefusal(parent: DeploymentRecord, sha: string, context: string, description: string): Promise<void> {
    const target = await targetOf(parent, this.#deps);
    if (!target) return;
    await this.#calls.now(target, {
      method: 'POST',
      path: `/repos/${target.path}/statuses/${sha}`,
      body: { state: 'error', context, description: describe(description) },
    });
  }

  /** `DELETED`: the revision's GitHub deployment (if it has one and is not inactive yet) becomes inactive. */
  async #deleted(event: OutboxEvent): Promise<string> {
    const record = await this.#deps.github.githubDeployment(event.revision_id);
    if (!record || record.last_state === 'inactive') return 'nothing to mark inactive';
    await this.#inactive(event, record, targetOfRecord(record));
    return 'sent';
  }

  async #inactive(event: OutboxEvent, record: GithubDeploymentRecord, target: Target): Promise<void> {
    const body = { state: 'inactive', description: 'Replaced or deleted', log_url: record.log_url ?? '', auto_inactive: false };
    await this.#deploymentStatus(event, record, target, 'inactive', body);
    await this.#deps.github.setGithubDeploymentState(record.revision_id, 'inactive');
  }

  /** The revision's GitHub deployment, created (once) when it has none; null when GitHub refused it for good. */
  async #ensureDeployment(
    event: OutboxEvent,
    revision: RevisionRecord,
    deployment: DeploymentRecord,
    target: Target,
    sha: string,
    logUrl: string,
  ): Promise<GithubDeploymentRecord | null> {
    const { github, clock } = this.#deps;
    const existing = await github.githubDeployment(revision.id);
    if (existing) return existing;
    if (await github.wasSent(revision.id, 'deployment', 'refused')) return null;
    const { environment, transient, production } = githubEnvironmentOf(deployment);
    const body = {
      ref: sha,
      task: 'deploy',
      auto_merge: false,
      required_contexts: [],
      environment,
      description: describe(`Revision ${revision.id}`),
      transient_environment: transient,
      production_environment: production,
      payload: { revision_id: revision.id, deployment_id: deployment.id },
    };
    let created: { id: number } | null = null;
    const made = await this.#calls.once(event, target, {
      revisionId: revision.id,
      call: 'deployment',
      state: 'created',
      request: { method: 'POST', path: `/repos/${target.path}/deployments`, body },
      alreadyThere: async () => {
        // A creation cut off by a crash: find it by the revision id in its payload rather than make a second.
        const listed = await this.#calls.get<Array<{ id: number; payload: unknown }>>(
          target,
          `/repos/${target.path}/deployments?sha=${sha}&environment=${encodeURIComponent(environment)}&per_page=100`,
        );
        const found = listed.find(
          (d) => typeof d.payload === 'object' && d.payload !== null && (d.payload as { revision_id?: unknown }).revision_id === revision.id,
        );
        if (found) created = { id: found.id };
        return Boolean(found);
      },
      onAnswer: (answer) => (created = answer as { id: number }),
    });
    if (!made || !created) {
      await github.markSent(revision.id, 'deployment', 'refused', clock.now());
      return null;
    }
    const record: GithubDeploymentRecord = {
      revision_id: revision.id,
      deployment_id: deployment.id,
      github_deployment_id: (created as { id: number }).id,
      installation_id: target.installationId,
      owner: target.repository.owner,
      repo: target.repository.name,
      sha,
      environment,
      environment_url: deployment.source_config.custom_url,
      log_url: logUrl,
      last_state: null,
      created_at: clock.now(),
    };
    await github.recordGithubDeployment(record);
    return record;
  }
}

/** Whether two GitHub deployments are in one environment of one repository (what GitHub's auto_inactive covers). */
function sameEnvironment(a: GithubDeploymentRecord, b: GithubDeploymentRecord): boolean {
  return a.environment === b.environment && a.owner.toLowerCase() === b.owner.toLowerCase() && a.repo.toLowerCase() === b.repo.toLowerCase();
}
