import type { AgentTransition, LiveDeployments, RuntimeLogAppend, RuntimeLogsStored } from '../../../shared/schemas/agent.ts';
import type { Clock } from '../../lib/clock.ts';
import type { AgentStore } from '../../store/agents.ts';
import type { DeploymentStore, RevisionLogStore, RevisionRecord, RevisionStore } from '../../store/types.ts';
import { BadRequest, Conflict, NotFound } from '../errors.ts';
import type { LogCaps } from '../log-caps.ts';
import { sanitiseReportedText } from '../log-text.ts';
import type { Pipeline } from '../pipeline.ts';
import type { AgentPrincipal } from './listener-tokens.ts';
import type { RuntimeLogLimits } from './runtime-log-limits.ts';
import { workDeployment, workRevision } from './work-items.ts';

/**
 * The one move after `DEPLOYED`, outside any claim: the live revision's server kept exiting (the
 * `local` agent's restarts are spent), so the revision failed (docs/decisions/failing-a-live-revision.md).
 */
const LIVE_FAILURE = { from: 'DEPLOYED', to: 'DEPLOY_FAILED' } as const;

export type LiveRevisionDeps = {
  store: Pick<DeploymentStore, 'getDeploymentById'> & Pick<RevisionStore, 'getRevisionById' | 'getRevisionWork'> & Pick<RevisionLogStore, 'appendLogs'>;
  agents: Pick<AgentStore, 'liveDeployments'>;
  pipeline: Pick<Pipeline, 'transition'>;
  clock: Clock;
  /** What an agent may write to the log: per revision, per token and second. */
  logCaps: LogCaps;
  /** How fast runtime log lines are stored (per deployment, per agent token); the revision's cap is `logCaps`. */
  runtimeLogLimits: RuntimeLogLimits;
};

/**
 * The revisions live on a listener once their claims have ended (`DEPLOYED`): what its agents
 * restart, what their servers print, and the one move left to them, failing.
 */
export class LiveRevisions {
  readonly #deps: LiveRevisionDeps;

  constructor(deps: LiveRevisionDeps) {
    this.#deps = deps;
  }

  /**
   * Appends what a live revision's agent server printed after `DEPLOYED` to its deploy log, as
   * far as the limits allow (the rest is counted, and said in one line when room is left for it).
   * Only a revision live on the caller's own listener: 404 for any other.
   */
  async appendRuntimeLogs(agent: AgentPrincipal, revisionId: string, body: RuntimeLogAppend): Promise<RuntimeLogsStored> {
    const { agents, store, clock } = this.#deps;
    const live = (await agents.liveDeployments(agent.listenerId)).find((l) => l.revisionId === revisionId);
    if (!live) throw new NotFound(`Revision ${revisionId} is not live on this listener.`);
    const wanted = body.lines.length + (body.dropped > 0 ? 1 : 0);
    const admitted = this.#deps.runtimeLogLimits.admit({ deploymentId: live.deploymentId, tokenId: agent.tokenId, wanted, nowMs: Date.parse(clock.now()) });
    let keep = Math.min(admitted, body.lines.length);
    let dropped = body.dropped + body.lines.length - keep;
    // The line that says lines were dropped takes the last place admitted, so it is never lost itself.
    if (dropped > 0 && admitted > 0 && keep === admitted) {
      keep -= 1;
      dropped += 1;
    }
    const lines: Array<{ type: 'deploy'; level: 'debug' | 'info' | 'warn' | 'error'; message: string; timestamp?: string }> = body.lines
      .slice(0, keep)
      .map((line) => ({ type: 'deploy', level: line.level, message: sanitiseReportedText(line.message), timestamp: line.timestamp }));
    if (dropped > 0 && admitted > 0)
      lines.push({
        type: 'deploy',
        level: 'warn',
        message: `${dropped} runtime log line(s) dropped: the deployment printed more than its log's rate limit or cap allows`,
      });
    // The revision's own cap (kept by the store, across processes) may drop more: answer what it kept.
    const written = await store.appendLogs(revisionId, lines, clock.now(), this.#deps.logCaps.revision);
    return { stored: written.stored, dropped: dropped + written.dropped };
  }

  /**
   * `DEPLOYED → DEPLOY_FAILED` of a revision live on the caller's listener, with its cause as the
   * status message and as an error line of its deploy log, written in the same transaction. Any
   * other move is 400; a revision its deployment no longer serves (superseded by a newer one, or
   * already failed) is 409, so a stale agent never fails what replaced it; another listener's is 404.
   */
  async failLive(agent: AgentPrincipal, revisionId: string, body: AgentTransition): Promise<RevisionRecord> {
    const { agents, pipeline, store } = this.#deps;
    if (body.from !== LIVE_FAILURE.from || body.to !== LIVE_FAILURE.to)
      throw new BadRequest(`After a claim has ended an agent may only move a revision from DEPLOYED to DEPLOY_FAILED, not from ${body.from} to ${body.to}.`);
    if (body.repo_commit_sha) throw new BadRequest('repo_commit_sha is recorded with the move out of BUILDING, not with a live revision failing.');
    const message = body.status_message ? sanitiseReportedText(body.status_message).trim() : '';
    if (!message) throw new BadRequest('status_message must say why the live revision failed.');
    const revision = await store.getRevisionById(revisionId);
    const live = revision ? (await agents.liveDeployments(agent.listenerId)).find((l) => l.deploymentId === revision.deployment_id) : undefined;
    if (!revision || !live) throw new NotFound(`Revision ${revisionId} is not a revision of a deployment on this listener.`);
    if (live.revisionId !== revisionId)
      throw new Conflict(`Revision ${revisionId} is no longer its deployment's live revision (${live.revisionId} is); it is not failed.`);
    const moved = await pipeline.transition({
      revisionId,
      from: [LIVE_FAILURE.from],
      to: LIVE_FAILURE.to,
      statusMessage: message,
      logs: [{ type: 'deploy', level: 'error', message }],
    });
    if (!moved) {
      const current = await store.getRevisionById(revisionId);
      throw new Conflict(`Revision ${revisionId} is ${current?.status ?? 'gone'}, not DEPLOYED; it is not failed.`);
    }
    return moved;
  }

  /**
   * What the listener should be running now: each live revision with its secrets, to restart
   * without rebuilding. Not a sign of life: a restarting agent asks before its proxy serves them,
   * and its deployments must not show READY until its heartbeat says it does.
   */
  async live(agent: AgentPrincipal): Promise<LiveDeployments> {
    const { agents, store } = this.#deps;
    const deployments: LiveDeployments['deployments'] = [];
    for (const live of await agents.liveDeployments(agent.listenerId)) {
      const [deployment, revision] = await Promise.all([store.getDeploymentById(live.deploymentId), store.getRevisionWork(live.revisionId)]);
      // A live revision failed after DEPLOYED (its server kept exiting) is not started again.
      if (deployment && revision?.status === 'DEPLOYED')
        deployments.push({ deployment: workDeployment(deployment), revision: workRevision(revision, deployment) });
    }
    return { deployments };
  }
}
