import { type GithubRepository, repositoryOnHost } from '../../shared/repo-url.ts';
import { isTerminal, type RevisionStatus } from '../../shared/schemas/revision.ts';
import { TokenRefused } from '../domain/repository-access.ts';
import type { Clock } from '../lib/clock.ts';
import { PollLoop } from '../lib/poll-loop.ts';
import type { Logger } from '../logger.ts';
import type { GithubDeploymentRecord, GithubStore, OutboxEvent } from '../store/github.ts';
import type { DeploymentRecord, RevisionRecord, Store } from '../store/types.ts';
import type { GithubApp } from './app-settings.ts';
import { type GithubApi, GithubApiError } from './github-api.ts';
import type { GithubPace } from './github-pace.ts';
import type { InstallationPermissions } from './installation-permissions.ts';
import type { InstallationTokens } from './installation-tokens.ts';
import { isRateLimited, rateLimitedUntil } from './rate-limits.ts';
import { describe, githubEnvironmentOf, planFor, postedDeploymentState, type StatusPlan } from './status-plan.ts';

/** The console's page of one revision (contract §16): what a browser opens from GitHub's Details and log links. */
export function revisionPageUrl(publicUrl: string, deploymentId: string, revisionId: string): string {
  return `${publicUrl}/console/deployments/${encodeURIComponent(deploymentId)}/revisions/${encodeURIComponent(revisionId)}`;
}

/** What the sender's token may do: create deployments and statuses on the one repository (and check runs, where granted). */
const WRITE = { deployments: 'write', statuses: 'write' } as const;
const WRITE_WITH_CHECKS = { checks: 'write', deployments: 'write', statuses: 'write' } as const;
/** Log lines a check run's summary ends with. */
const SUMMARY_LOG_LINES = 50;
/** GitHub's limit on a check run's `output.summary`. */
const MAX_SUMMARY = 65_535;
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

/** A call could not be made now: the event is tried again later, from the call that failed. */
class TryLater extends Error {
  readonly untilMs: number | null;
  constructor(message: string, untilMs: number | null) {
    super(message);
    this.untilMs = untilMs;
  }
}

/** The installation's pace is full until `untilMs`: the event waits its turn, and the pass goes on with other installations' events. */
class WaitsItsTurn extends Error {
  readonly untilMs: number;
  constructor(untilMs: number) {
    super("waiting for the installation's pace");
    this.untilMs = untilMs;
  }
}

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
export class GithubStatusSender {
  readonly #deps: StatusSenderDeps;
  readonly #loop: PollLoop;
  #draining: Promise<number> | null = null;
  #prunedAt = 0;

  constructor(deps: StatusSenderDeps) {
    this.#deps = deps;
    this.#loop = new PollLoop({
      pass: () => this.#tick(),
      intervalMs: deps.pollMs ?? 500,
      onError: (error) => deps.log.error('github: the status outbox pass failed; it runs again', { error: String(error) }),
    });
  }

  start(): void {
    this.#loop.start();
  }

  stop(): void {
    this.#loop.stop();
  }

  async #tick(): Promise<void> {
    if (this.#deps.lead && !(await this.#deps.lead())) return;
    const now = Date.parse(this.#deps.clock.now());
    if (now - this.#prunedAt > PRUNE_EVERY_MS) {
      this.#prunedAt = now;
      await this.#deps.github.prune(new Date(now - KEEP_SENT_MS).toISOString(), new Date(now).toISOString());
    }
    // Drained until nothing is due, so a burst is sent at the pace rather than a batch per poll.
    while (!this.#loop.stopped && (await this.drain()) > 0);
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
      if (this.#loop.stopped) break;
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
      const target = await this.#target(deployment);
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
        const posted = await this.#call(
          event,
          revision.id,
          'deployment_status',
          state,
          target,
          { method: 'POST', path: `/repos/${target.path}/deployments/${record.github_deployment_id}/statuses`, body },
          () => this.#listed(target, `/repos/${target.path}/deployments/${record.github_deployment_id}/statuses?per_page=100`, (s) => s.state === state),
        );
        await github.setGithubDeploymentState(revision.id, state);
        if (posted && autoInactive) inactivatedByGithub = record;
      }
    }
    if (plan.check && target.checks) await this.#checkRun(event, revision, deployment, target, sha, logUrl, plan);
    if (plan.commit && !target.checks) {
      const context = `deploy/${deployment.name}`;
      const body = { state: plan.commit, target_url: logUrl, description: describe(plan.description), context };
      await this.#call(event, revision.id, 'commit_status', plan.commit, target, { method: 'POST', path: `/repos/${target.path}/statuses/${sha}`, body }, () =>
        this.#listed(target, `/repos/${target.path}/commits/${sha}/statuses?per_page=100`, (s) => s.context === context && s.state === plan.commit),
      );
    }
    if (plan.replacesOthers) {
      for (const other of await github.githubDeploymentsOf(deployment.id)) {
        if (other.revision_id === revision.id || other.last_state !== 'success') continue;
        if (inactivatedByGithub && sameEnvironment(other, inactivatedByGithub)) await github.setGithubDeploymentState(other.revision_id, 'inactive');
        else await this.#inactive(event, other, target);
      }
    }
  }

  /**
   * A commit status that says why a pull request got no preview (`max_concurrent`). Sent at once,
   * paced, not through the outbox: the webhook delivery that asked is itself stored and retried.
   */
  async postRefusal(parent: DeploymentRecord, sha: string, context: string, description: string): Promise<void> {
    const target = await this.#target(parent);
    if (!target) return;
    await this.#paced(target, 'inline');
    const token = await this.#deps.tokens.forRepository(target.installationId, target.repository, target.write);
    await this.#deps.api.request({
      method: 'POST',
      path: `/repos/${target.path}/statuses/${sha}`,
      auth: { kind: 'token', token },
      body: { state: 'error', context, description: describe(description) },
    });
  }

  /** `DELETED`: the revision's GitHub deployment (if it has one and is not inactive yet) becomes inactive. */
  async #deleted(event: OutboxEvent): Promise<string> {
    const record = await this.#deps.github.githubDeployment(event.revision_id);
    if (!record || record.last_state === 'inactive') return 'nothing to mark inactive';
    await this.#inactive(event, record, {
      repository: { owner: record.owner, name: record.repo },
      installationId: record.installation_id,
      path: `${record.owner}/${record.repo}`,
      write: WRITE,
      checks: false,
    });
    return 'sent';
  }

  async #inactive(event: OutboxEvent, record: GithubDeploymentRecord, target: Target): Promise<void> {
    const body = { state: 'inactive', description: 'Replaced or deleted', log_url: record.log_url ?? '', auto_inactive: false };
    await this.#call(
      event,
      record.revision_id,
      'deployment_status',
      'inactive',
      target,
      { method: 'POST', path: `/repos/${target.path}/deployments/${record.github_deployment_id}/statuses`, body },
      () => this.#listed(target, `/repos/${target.path}/deployments/${record.github_deployment_id}/statuses?per_page=100`, (s) => s.state === 'inactive'),
    );
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
    const made = await this.#call(
      event,
      revision.id,
      'deployment',
      'created',
      target,
      { method: 'POST', path: `/repos/${target.path}/deployments`, body },
      async () => {
        // A creation cut off by a crash: find it by the revision id in its payload rather than make a second.
        const listed = await this.#get<Array<{ id: number; payload: unknown }>>(
          target,
          `/repos/${target.path}/deployments?sha=${sha}&environment=${encodeURIComponent(environment)}&per_page=100`,
        );
        const found = listed.find(
          (d) => typeof d.payload === 'object' && d.payload !== null && (d.payload as { revision_id?: unknown }).revision_id === revision.id,
        );
        if (found) created = { id: found.id };
        return Boolean(found);
      },
      (answer) => (created = answer as { id: number }),
    );
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

  /**
   * One content-creating call, unless already made: recorded before (so a crash mid-call is
   * known) and after (so it is never made again). Answers false when GitHub refused it for good
   * (logged; the event goes on), throws TryLater when it should be tried again.
   */
  async #call(
    event: OutboxEvent,
    revisionId: string,
    call: string,
    state: string,
    target: Target,
    request: { method: 'POST' | 'PATCH'; path: string; body: unknown },
    alreadyThere: () => Promise<boolean>,
    onAnswer?: (answer: unknown) => void,
  ): Promise<boolean> {
    const { github, clock, log } = this.#deps;
    if (await github.wasSent(revisionId, call, state)) return true;
    const marker = `sending ${revisionId} ${call} ${state}`;
    if (event.outcome === marker && (await this.#safely(target, () => alreadyThere()))) {
      await github.markSent(revisionId, call, state, clock.now());
      return true;
    }
    await github.noteEvent(event.id, marker);
    event.outcome = marker;
    await this.#paced(target);
    try {
      const answer = await this.#deps.api.request({ ...request, auth: { kind: 'token', token: await this.#token(target) } });
      onAnswer?.(answer);
    } catch (error) {
      if (error instanceof GithubApiError && error.status === 422 && /maximum number of statuses/i.test(error.message)) {
        log.warn('github: GitHub keeps no more statuses for this commit and context; this one is dropped', {
          revision_id: revisionId,
          call,
          state,
          path: request.path,
        });
        await github.markSent(revisionId, call, state, clock.now());
        return false;
      }
      this.#retryable(error, target, event.attempts);
      log.error('github: GitHub refused a status; it is dropped', { revision_id: revisionId, call, state, error: (error as Error).message });
      await github.markSent(revisionId, call, `${state}:refused`, clock.now());
      return false;
    }
    await github.markSent(revisionId, call, state, clock.now());
    return true;
  }

  /**
   * Throws TryLater for what may pass (5xx, timeouts, a rate limit, a token GitHub no longer
   * takes); returns for a refusal for good, a token GitHub will not mint included (a repository not
   * selected, permissions not accepted, the installation gone): those wait for a person on GitHub.
   */
  #retryable(error: unknown, target: Target, attempts = 0): void {
    if (error instanceof TryLater) throw error;
    if (error instanceof TokenRefused) return;
    if (isRateLimited(error)) {
      // Never dropped for a limit: the installation's calls wait as long as GitHub's rules say.
      const until = rateLimitedUntil(error.headers, attempts, Date.parse(this.#deps.clock.now()));
      this.#deps.pace.pause(target.installationId, until);
      throw new TryLater(error.message, until);
    }
    if (error instanceof GithubApiError) {
      if (error.status >= 500) throw new TryLater(error.message, null);
      if (error.status === 401) {
        this.#deps.tokens.forget(target.installationId, target.repository, target.write);
        throw new TryLater(error.message, null);
      }
      return;
    }
    // Network errors and timeouts: GitHub may be back later.
    throw new TryLater(error instanceof Error ? error.message : String(error), null);
  }

  async #safely(target: Target, check: () => Promise<boolean>): Promise<boolean> {
    try {
      return await check();
    } catch (error) {
      this.#retryable(error, target);
      return false;
    }
  }

  async #listed(target: Target, path: string, match: (status: { state?: string; context?: string }) => boolean): Promise<boolean> {
    const statuses = await this.#get<Array<{ state?: string; context?: string }>>(target, path);
    return statuses.some(match);
  }

  async #get<T>(target: Target, path: string): Promise<T> {
    try {
      return await this.#deps.api.request<T>({ method: 'GET', path, auth: { kind: 'token', token: await this.#token(target) } });
    } catch (error) {
      this.#retryable(error, target);
      if (error instanceof TokenRefused) throw error;
      throw new TryLater((error as Error).message, null);
    }
  }

  async #token(target: Target): Promise<string> {
    try {
      return await this.#deps.tokens.forRepository(target.installationId, target.repository, target.write);
    } catch (error) {
      this.#retryable(error, target);
      // A mint refused for good goes to the caller as it is: the call is dropped with GitHub's reason.
      if (error instanceof TokenRefused) throw error;
      throw new TryLater(`no token: ${(error as Error).message}`, null);
    }
  }

  /**
   * Takes a slot of the installation's pace. An outbox call whose installation is paced throws
   * WaitsItsTurn, so one installation's queue never holds up another's in the same pass (GitHub
   * counts per installation); `inline` waits here instead (a refusal sent outside the outbox).
   */
  async #paced(target: Target, mode: 'outbox' | 'inline' = 'outbox'): Promise<void> {
    const { pace, clock } = this.#deps;
    for (let wait = pace.take(target.installationId); wait > 0; wait = pace.take(target.installationId)) {
      if (mode === 'outbox') throw new WaitsItsTurn(Date.parse(clock.now()) + wait);
      if (this.#loop.stopped) throw new TryLater('stopping', null);
      await new Promise((resolve) => setTimeout(resolve, Math.min(wait, 1000)));
    }
  }

  async #target(deployment: DeploymentRecord): Promise<Target | null> {
    const { app, store, github, permissions } = this.#deps;
    const repository = deployment.source_config.repo_url ? repositoryOnHost(deployment.source_config.repo_url, app.webUrl) : null;
    if (!repository || !deployment.source_config.integration_id) return null;
    const integration = await store.getIntegrationById(deployment.source_config.integration_id);
    if (!integration || integration.suspended || !(await github.accountOf(integration.id))) return null;
    let checks: boolean;
    try {
      checks = await permissions.canWrite(integration.installation_id, 'checks');
    } catch (error) {
      throw new TryLater(`the installation's permissions could not be read: ${(error as Error).message}`, null);
    }
    return {
      repository,
      installationId: integration.installation_id,
      path: `${repository.owner}/${repository.name}`,
      write: checks ? WRITE_WITH_CHECKS : WRITE,
      checks,
    };
  }

  /**
   * The revision's check run `deploy/<name>`: created (once) in the phase the revision is in, then
   * moved on (`in_progress`, then `completed` with its conclusion and a Markdown summary). Its
   * `external_id` is the revision id: GitHub's "Re-run" names it.
   */
  async #checkRun(
    event: OutboxEvent,
    revision: RevisionRecord,
    deployment: DeploymentRecord,
    target: Target,
    sha: string,
    pageUrl: string,
    plan: StatusPlan,
  ): Promise<void> {
    const { github, clock } = this.#deps;
    const check = plan.check!;
    const phase = check === 'queued' || check === 'in_progress' ? check : 'completed';
    const name = `deploy/${deployment.name}`;
    const fields = async () =>
      phase === 'completed'
        ? {
            status: 'completed',
            conclusion: check,
            completed_at: clock.now().replace(/\.\d+Z$/, 'Z'),
            output: { title: plan.description, summary: await this.#summary(revision, deployment, pageUrl, plan.description) },
          }
        : { status: phase };
    const record = await github.checkRun(revision.id);
    if (record) {
      // A PATCH sets the same fields when made twice: a call cut off by a crash is simply made again.
      await this.#call(
        event,
        revision.id,
        'check_run',
        phase,
        target,
        { method: 'PATCH', path: `/repos/${target.path}/check-runs/${record.check_run_id}`, body: await fields() },
        async () => false,
      );
      return;
    }
    if (await github.wasSent(revision.id, 'check_run', 'refused')) return;
    let created: { id: number } | null = null;
    // Made in the phase the revision is in now: a check run first seen late is not walked through the earlier ones.
    const body = { name, head_sha: sha, external_id: revision.id, details_url: pageUrl, ...(await fields()) };
    const made = await this.#call(
      event,
      revision.id,
      'check_run',
      'created',
      target,
      { method: 'POST', path: `/repos/${target.path}/check-runs`, body },
      async () => {
        const listed = await this.#get<{ check_runs: Array<{ id: number; external_id: string | null }> }>(
          target,
          `/repos/${target.path}/commits/${sha}/check-runs?check_name=${encodeURIComponent(name)}&per_page=100`,
        );
        const found = listed.check_runs.find((r) => r.external_id === revision.id);
        if (found) created = { id: found.id };
        return Boolean(found);
      },
      (answer) => (created = answer as { id: number }),
    );
    if (!made || !created) {
      await github.markSent(revision.id, 'check_run', 'refused', clock.now());
      return;
    }
    await github.recordCheckRun({
      revision_id: revision.id,
      check_run_id: (created as { id: number }).id,
      installation_id: target.installationId,
      owner: target.repository.owner,
      repo: target.repository.name,
      created_at: clock.now(),
    });
    await github.markSent(revision.id, 'check_run', phase, clock.now());
  }

  /** The check run's Markdown summary: the status, the URL, the revision's page and its last 50 log lines. */
  async #summary(revision: RevisionRecord, deployment: DeploymentRecord, pageUrl: string, description: string): Promise<string> {
    const { store } = this.#deps;
    const newest = async (type: 'build' | 'deploy') =>
      (await store.searchLogs(revision.id, { type, order: 'desc', cursor: 0, limit: SUMMARY_LOG_LINES })).logs.reverse();
    const lines = [...(await newest('build')), ...(await newest('deploy'))].slice(-SUMMARY_LOG_LINES);
    const url = deployment.source_config.custom_url;
    const fence = '````';
    const log = lines.map((l) => `${l.timestamp} ${l.level.padEnd(5)} ${l.message.replaceAll(fence, '```')}`).join('\n');
    const summary = [
      `**Status:** ${description}`,
      `**URL:** ${url ? `<${url}>` : 'none yet'}`,
      `**Revision:** [${revision.id}](${pageUrl})`,
      '',
      `**Last ${SUMMARY_LOG_LINES} log lines**`,
      '',
      fence,
      log || '(no log lines)',
      fence,
    ].join('\n');
    return summary.length <= MAX_SUMMARY ? summary : `${summary.slice(0, MAX_SUMMARY - fence.length - 2)}\n${fence}`;
  }
}

/** Whether two GitHub deployments are in one environment of one repository (what GitHub's auto_inactive covers). */
function sameEnvironment(a: GithubDeploymentRecord, b: GithubDeploymentRecord): boolean {
  return a.environment === b.environment && a.owner.toLowerCase() === b.owner.toLowerCase() && a.repo.toLowerCase() === b.repo.toLowerCase();
}

type Target = {
  repository: GithubRepository;
  installationId: number;
  path: string;
  /** The permissions of the sender's token for this installation. */
  write: Record<string, 'write'>;
  /** Whether check runs replace commit statuses. */
  checks: boolean;
};
