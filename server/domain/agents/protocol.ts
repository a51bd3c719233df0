import type { Readable } from 'node:stream';
import { deploymentUrl } from '../../../shared/dns-safe-name.ts';
import type {
  AgentHeartbeat,
  AgentHeartbeatAck,
  AgentLogAppend,
  AgentTransition,
  LeaseRenewed,
  LiveDeployments,
  RuntimeLogAppend,
  RuntimeLogsStored,
  WorkItem,
} from '../../../shared/schemas/agent.ts';
import { isTerminal, type RevisionStatus } from '../../../shared/schemas/revision.ts';
import type { AgentDataPlane } from '../../dataplane/listener-agent.ts';
import type { Clock } from '../../lib/clock.ts';
import { machineAuditEntry, withAuditEntry } from '../../lib/request-scope.ts';
import type { RevisionWatch } from '../../lib/revision-watch.ts';
import type { AgentStore, ClaimRecord } from '../../store/agents.ts';
import type { DeploymentStore, ListenerStore, RevisionLogStore, RevisionRecord, RevisionStore, WorkspaceStore } from '../../store/types.ts';
import { BadRequest, Conflict, NotFound, Unauthorized } from '../errors.ts';
import type { LogCaps } from '../log-caps.ts';
import { sanitiseReportedText } from '../log-text.ts';
import type { Pipeline } from '../pipeline.ts';
import type { RepositoryAccess } from '../repository-access.ts';
import type { Uploads } from '../uploads.ts';
import type { AgentPrincipal } from './listener-tokens.ts';
import { LiveRevisions } from './live-revisions.ts';
import type { RuntimeLogLimits } from './runtime-log-limits.ts';
import { TokenSessions } from './token-sessions.ts';
import { sourceSubject, WorkItems } from './work-items.ts';

/** The stage changes an agent may report; everything else (QUEUED, SKIPPED, INTERRUPTED…) is the pipeline's. */
const AGENT_MOVES: Partial<Record<RevisionStatus, readonly RevisionStatus[]>> = {
  AWAITING_BUILD: ['BUILDING', 'BUILD_FAILED'],
  BUILDING: ['AWAITING_DEPLOY', 'BUILD_FAILED'],
  AWAITING_DEPLOY: ['DEPLOYING', 'DEPLOY_FAILED'],
  DEPLOYING: ['DEPLOYED', 'DEPLOY_FAILED'],
};

/** While nothing wakes a long-poll, it looks again this often: a lapsed lease frees work without any event. */
const RECHECK_MS = 1000;

export type AgentProtocolDeps = {
  store: RevisionStore &
    RevisionLogStore &
    Pick<DeploymentStore, 'getDeploymentById'> &
    Pick<ListenerStore, 'getListenerById'> &
    Pick<WorkspaceStore, 'getWorkspace'>;
  agents: AgentStore;
  pipeline: Pipeline;
  plane: AgentDataPlane;
  wake: RevisionWatch;
  clock: Clock;
  leaseMs: number;
  /** Uploaded tarballs of `internal_source` revisions: signs their fetch URLs and streams them. */
  uploads: Uploads;
  /** What an agent may write to the log: per revision, per token and second. */
  logCaps: LogCaps;
  /** Installation tokens for private repositories on the GitHub App's host; absent without App settings. */
  repoAccess?: RepositoryAccess;
  /** How fast runtime log lines are stored (per deployment, per agent token); the revision's cap is `logCaps`. */
  runtimeLogLimits: RuntimeLogLimits;
};

/**
 * The listener-agent protocol (contract §9): long-poll claims with leases, stage changes through
 * the pipeline's compare-and-set transitions, log appends, heartbeats, teardown reports. Every
 * call is scoped to the caller's listener; a claim is only ever its claimant's.
 */
export class AgentProtocol {
  readonly #deps: AgentProtocolDeps;
  readonly #sessions = new TokenSessions();
  readonly #workItems: WorkItems;
  readonly #live: LiveRevisions;

  constructor(deps: AgentProtocolDeps) {
    this.#deps = deps;
    this.#workItems = new WorkItems(deps);
    this.#live = new LiveRevisions(deps);
  }

  async heartbeat(agent: AgentPrincipal, body: AgentHeartbeat): Promise<AgentHeartbeatAck> {
    const now = this.#deps.clock.now();
    await this.#deps.agents.recordHeartbeat({
      listenerId: agent.listenerId,
      now,
      version: body.version,
      capacity: body.capacity,
      publicUrl: body.public_url ?? null,
    });
    return { listener_id: agent.listenerId, heard_at: now, lease_ms: this.#deps.leaseMs };
  }

  /**
   * Claims the next piece of work, holding the request up to `waitMs` until some appears. A revoke
   * of the caller's token ends the wait at once (401), and work claimed as the revoke lands goes
   * back to the queue: the token is read again after each claim, so no claim made after the revoke
   * was stored reaches this agent, whichever process holds the poll.
   */
  async claim(agent: AgentPrincipal, agentId: string, waitMs: number, signal?: AbortSignal): Promise<WorkItem | null> {
    const { agents, clock, wake } = this.#deps;
    const deadline = Date.now() + waitMs;
    const session = this.#sessions.poll(agent.tokenId);
    const ended = signal ? AbortSignal.any([signal, session.signal]) : session.signal;
    try {
      await agents.recordHeartbeat({ listenerId: agent.listenerId, now: clock.now() });
      for (;;) {
        if (session.signal.aborted) throw revokedToken();
        const now = clock.now();
        const claim = await agents.claimNext({ listenerId: agent.listenerId, agentId, claimId: crypto.randomUUID(), now, leaseUntil: this.#leaseFrom(now) });
        if (claim) {
          // Registered before the check: a revoke landing after it finds the claim and gives it back.
          this.#sessions.claimed(claim.claim_id, agent.tokenId, agent.listenerId);
          if (this.#sessions.isRevoked(agent.tokenId) || (await agents.findToken(agent.tokenHash))?.revoked !== false) {
            await this.#giveBack(claim.claim_id, agent.listenerId);
            throw revokedToken();
          }
          const item = await this.#workItems.forClaim(claim).catch(async (error: unknown) => {
            // No credentials now (GitHub unreachable): the work goes back to the queue, the agent polls again later.
            await this.#giveBack(claim.claim_id, agent.listenerId);
            throw error;
          });
          if (item && !this.#sessions.isRevoked(agent.tokenId)) return item;
          await this.#giveBack(claim.claim_id, agent.listenerId);
          if (item) throw revokedToken();
          continue;
        }
        const left = deadline - Date.now();
        if (left <= 0 || signal?.aborted) return null;
        await wake.wait(agent.listenerId, Math.min(left, RECHECK_MS), ended).changed;
      }
    } finally {
      session.done();
    }
  }

  /**
   * The token was revoked (here or in another process): its waiting polls here answer 401 and the
   * claims it took here go back to the queue now, for the listener's other agents.
   */
  async endToken(tokenId: string): Promise<void> {
    for (const { claimId, listenerId } of this.#sessions.revoke(tokenId)) await this.#giveBack(claimId, listenerId);
  }

  async #giveBack(claimId: string, listenerId: string): Promise<void> {
    this.#sessions.ended(claimId);
    await this.#deps.agents.releaseClaim(claimId);
    this.#deps.plane.wake(listenerId);
  }

  /** The claim ended with its work (its revision ended, released, torn down). */
  async #endClaim(claimId: string): Promise<void> {
    this.#sessions.ended(claimId);
    await this.#deps.agents.releaseClaim(claimId);
  }

  /** Extends the lease; 409 when the claim was lost (lapsed and taken) or its revision has ended. */
  async renew(agent: AgentPrincipal, claimId: string): Promise<LeaseRenewed> {
    const { agents, clock } = this.#deps;
    const claim = await this.#claim(agent, claimId);
    await agents.recordHeartbeat({ listenerId: agent.listenerId, now: clock.now() });
    const status = await this.#liveStatus(claim);
    const leaseUntil = this.#leaseFrom(clock.now());
    await agents.renewClaim(claimId, leaseUntil);
    return { claim_id: claimId, lease_expires_at: leaseUntil, status };
  }

  /** One stage change, compare-and-set: 409 naming the current status when the revision moved on. */
  async transition(agent: AgentPrincipal, claimId: string, body: AgentTransition) {
    const { pipeline, agents, store, clock } = this.#deps;
    const claim = await this.#claim(agent, claimId);
    if (claim.kind !== 'revision' || !claim.revision_id) throw new BadRequest('This claim is a teardown; it has no stages.');
    if (!AGENT_MOVES[body.from]?.includes(body.to)) throw new BadRequest(`An agent may not move a revision from ${body.from} to ${body.to}.`);
    const before = await store.getRevisionById(claim.revision_id);
    if (before?.status !== body.from) {
      if (before && isTerminal(before.status)) await this.#endClaim(claimId);
      throw new Conflict(`Revision ${claim.revision_id} is ${before?.status ?? 'gone'}, not ${body.from}; stop this work.`);
    }
    const workspace = await store.getWorkspace(before.tenant_id);
    const change = () =>
      pipeline.transition({
        revisionId: claim.revision_id!,
        from: [body.from],
        to: body.to,
        statusMessage: body.status_message == null ? null : sanitiseReportedText(body.status_message),
      });
    // Audited as the listener's agent, in the transaction of the stage change (none when it lost the compare-and-set).
    const moved = workspace
      ? await withAuditEntry(
          machineAuditEntry({
            actor: { kind: 'agent', id: agent.listenerId },
            organizationId: workspace.organization_id,
            workspaceId: before.tenant_id,
            action: 'transition',
            resourceType: 'revision',
            resourceId: before.id,
            fields: body.status_message == null ? ['status'] : ['status', 'status_message'],
            now: clock.now(),
          }),
          change,
        )
      : await change();
    if (!moved) {
      const current = await store.getRevisionById(claim.revision_id);
      if (current && isTerminal(current.status)) await this.#endClaim(claimId);
      throw new Conflict(`Revision ${claim.revision_id} is ${current?.status ?? 'gone'}, not ${body.from}; stop this work.`);
    }
    // Written only once the compare-and-set has won: an interrupt that lands between the check
    // above and the move leaves the revision as it was (a 409 changes nothing).
    let result = moved;
    if (body.repo_commit_sha) {
      await agents.setRevisionCommit(claim.revision_id, body.repo_commit_sha, clock.now());
      result = (await store.getRevisionById(claim.revision_id)) ?? moved;
    }
    if (result.status === 'DEPLOYED') await this.#useAgentUrl(agent.listenerId, claim.deployment_id);
    if (isTerminal(result.status)) await this.#endClaim(claimId);
    else await agents.renewClaim(claimId, this.#leaseFrom(clock.now()));
    return result;
  }

  /**
   * Appends log lines of the claimed revision in one write; 409 once the revision has ended, 429
   * (with Retry-After) past the token's rate. Past the revision's cap the lines are dropped and
   * counted in its marker line; the request still succeeds, so the agent goes on to report the end.
   */
  async appendLogs(agent: AgentPrincipal, claimId: string, body: AgentLogAppend): Promise<void> {
    const { store, clock, logCaps } = this.#deps;
    const claim = await this.#claim(agent, claimId);
    if (claim.kind !== 'revision' || !claim.revision_id) throw new BadRequest('This claim is a teardown; it has no log.');
    await this.#liveStatus(claim);
    const lines = body.lines.map((line) => ({ ...line, message: sanitiseReportedText(line.message) }));
    logCaps.admit(
      agent.tokenId,
      lines.length,
      lines.reduce((sum, line) => sum + Buffer.byteLength(line.message), 0),
    );
    await store.appendLogs(claim.revision_id, lines, clock.now(), logCaps.revision);
  }

  /** Appends what a live revision's agent server printed after `DEPLOYED` (`LiveRevisions.appendRuntimeLogs`). */
  appendRuntimeLogs(agent: AgentPrincipal, revisionId: string, body: RuntimeLogAppend): Promise<RuntimeLogsStored> {
    return this.#live.appendRuntimeLogs(agent, revisionId, body);
  }

  /** `DEPLOYED → DEPLOY_FAILED` of a revision live on the caller's listener (`LiveRevisions.failLive`). */
  failLive(agent: AgentPrincipal, revisionId: string, body: AgentTransition): Promise<RevisionRecord> {
    return this.#live.failLive(agent, revisionId, body);
  }

  /** The agent stopped the deployment's servers and removed its files: the pipeline removes it. */
  async teardownDone(agent: AgentPrincipal, claimId: string): Promise<void> {
    const claim = await this.#claim(agent, claimId);
    if (claim.kind !== 'teardown') throw new BadRequest('This claim is not a teardown.');
    await this.#deps.plane.teardownDone(claim.deployment_id, claimId);
    this.#sessions.ended(claimId);
  }

  /** Gives a claim back before its lease ends (the agent is shutting down): another agent may take it. */
  async release(agent: AgentPrincipal, claimId: string): Promise<void> {
    await this.#claim(agent, claimId);
    await this.#giveBack(claimId, agent.listenerId);
  }

  /** What the listener should be running now (`LiveRevisions.live`). */
  live(agent: AgentPrincipal): Promise<LiveDeployments> {
    return this.#live.live(agent);
  }

  /**
   * `GET …/claims/{claim_id}/source`: the uploaded tarball of the claimed `internal_source`
   * revision, streamed from its chunk rows. It takes the URL's signature (bound to the listener
   * and the claim, expiring), the listener's token, and a claim still held on a revision still
   * under way: 403 for a signature that does not fit or expired, 409 once the claim or the
   * revision has ended, 404 when the revision has no uploaded tarball.
   */
  async openSource(
    agent: AgentPrincipal,
    claimId: string,
    expires: string | undefined,
    signature: string | undefined,
  ): Promise<{ size: number; stream: Readable }> {
    const { uploads, store } = this.#deps;
    uploads.checkFetch(sourceSubject(agent.listenerId, claimId), expires, signature);
    const claim = await this.#claim(agent, claimId);
    if (claim.kind !== 'revision' || !claim.revision_id) throw new BadRequest('This claim is a teardown; it has no source.');
    await this.#liveStatus(claim);
    const revision = await store.getRevisionById(claim.revision_id);
    const objectPath = revision?.source === 'internal_source' ? revision.source_revision_config.source_tarball_path : null;
    const found = objectPath ? await uploads.read(claim.deployment_id, objectPath) : null;
    if (!found) throw new NotFound(`Revision ${claim.revision_id} has no uploaded source tarball.`);
    return found;
  }

  async #claim(agent: AgentPrincipal, claimId: string): Promise<ClaimRecord> {
    const claim = await this.#deps.agents.getClaim(agent.listenerId, claimId);
    if (!claim) throw new Conflict(`Claim ${claimId} is not held: its lease lapsed and the work went back to the queue; stop this work.`);
    return claim;
  }

  /** The claimed revision's status; 409 (and the claim released) when it has ended, e.g. interrupted. */
  async #liveStatus(claim: ClaimRecord): Promise<RevisionStatus | null> {
    if (claim.kind !== 'revision' || !claim.revision_id) return null;
    const revision = await this.#deps.store.getRevisionById(claim.revision_id);
    if (!revision || isTerminal(revision.status)) {
      await this.#endClaim(claim.claim_id);
      throw new Conflict(`Revision ${claim.revision_id} is ${revision?.status ?? 'gone'}; stop this work.`);
    }
    return revision.status;
  }

  /**
   * A deployment whose URL the server sets, deployed by an agent that reported a URL template:
   * its `custom_url` becomes the URL that agent's proxy answers on (what `langgraph deploy` prints).
   */
  async #useAgentUrl(listenerId: string, deploymentId: string): Promise<void> {
    const { agents, store, clock } = this.#deps;
    const template = await agents.agentPublicUrl(listenerId);
    if (!template) return;
    const deployment = await store.getDeploymentById(deploymentId);
    if (!deployment || deployment.source === 'external_docker') return;
    const url = deploymentUrl(template, deployment.name);
    if (deployment.source_config.custom_url !== url) await agents.setCustomUrl(deploymentId, url, clock.now());
  }

  #leaseFrom(now: string): string {
    return new Date(Date.parse(now) + this.#deps.leaseMs).toISOString();
  }
}

function revokedToken(): Unauthorized {
  return new Unauthorized('Invalid or revoked listener token.');
}
