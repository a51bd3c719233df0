import type Database from 'better-sqlite3';
import { LEASE_QUERIES } from './hot-queries.ts';
import type { ListenerRecord } from './types.ts';

type Row = Record<string, unknown>;

/** Revision statuses an agent works on (the stages between queued and an end). */
export const AGENT_STAGES = ['AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING'] as const;
export const STAGES_SQL = AGENT_STAGES.map((s) => `'${s}'`).join(', ');

/** The listener that serves a deployment: its own `listener_id`, else its workspace's default. */
export const SERVING_LISTENER = 'COALESCE(d.listener_id, (SELECT w.default_listener_id FROM workspaces w WHERE w.id = d.tenant_id))';

export type ListenerTokenRecord = { id: string; listener_id: string; tenant_id: string; created_at: string; revoked: boolean };

export type ClaimRecord = {
  work_key: string;
  claim_id: string;
  listener_id: string;
  kind: 'revision' | 'teardown';
  revision_id: string | null;
  deployment_id: string;
  agent_id: string;
  lease_expires_at: string;
  claimed_at: string;
};

/** What the listener-agent protocol needs from storage; the SQLite and PostgreSQL stores implement it. */
export interface AgentStore {
  createToken(input: { id: string; listenerId: string; tenantId: string; tokenHash: string; now: string }): Promise<void>;
  findToken(tokenHash: string): Promise<(ListenerTokenRecord & { token_hash: string }) | null>;
  listTokens(listenerId: string): Promise<ListenerTokenRecord[]>;
  revokeToken(listenerId: string, tokenId: string, now: string): Promise<boolean>;
  servingListener(deploymentId: string): Promise<ListenerRecord | null>;
  setDefaultListener(workspaceId: string, listenerId: string | null): Promise<boolean>;
  claimNext(input: { listenerId: string; agentId: string; claimId: string; now: string; leaseUntil: string }): Promise<ClaimRecord | null>;
  getClaim(listenerId: string, claimId: string): Promise<ClaimRecord | null>;
  renewClaim(claimId: string, leaseUntil: string): Promise<boolean>;
  releaseClaim(claimId: string): Promise<void>;
  /**
   * Stores that the deployment (still being deleted) needs no more teardown: an agent reported it
   * done (its claim, `claimId`, ends in the same transaction) or a `DELETE ?force=true` said to stop
   * waiting for one. Stored, it outlives the moment: a pipeline not waiting yet, or in a process
   * that takes the teardown over after a crash or a restart, finds it.
   */
  recordTeardownDone(deploymentId: string, now: string, claimId?: string): Promise<void>;
  /** Whether the deployment's teardown was reported done (or forced). */
  teardownReported(deploymentId: string): Promise<boolean>;
  setRevisionCommit(revisionId: string, sha: string, now: string): Promise<void>;
  heard(input: { listenerId: string; now: string; version?: string; capacity?: number; publicUrl?: string | null }): Promise<string[]>;
  /** The URL template the listener's agent reported (`{name}` in it), or null. */
  agentPublicUrl(listenerId: string): Promise<string | null>;
  /** Sets a deployment's `custom_url` (the one its listener's agent serves it under). */
  setCustomUrl(deploymentId: string, url: string, now: string): Promise<void>;
  markSilent(cutoff: string, now: string): Promise<string[]>;
  liveDeployments(listenerId: string): Promise<Array<{ deploymentId: string; revisionId: string }>>;
}

/**
 * All SQL of the listener-agent protocol: tokens, claims and leases, heartbeats, the silent-listener
 * sweep. Claims are compare-and-set in one transaction, so two agents never hold the same work.
 */
export class SqliteAgentStore implements AgentStore {
  readonly #db: Database.Database;
  readonly #statements = new Map<string, Database.Statement>();

  constructor(db: Database.Database) {
    this.#db = db;
  }

  #sql(sql: string): Database.Statement {
    let statement = this.#statements.get(sql);
    if (!statement) this.#statements.set(sql, (statement = this.#db.prepare(sql)));
    return statement;
  }

  // ------------------------------------------------------------ tokens

  async createToken(input: { id: string; listenerId: string; tenantId: string; tokenHash: string; now: string }): Promise<void> {
    this.#sql('INSERT INTO listener_tokens (id, listener_id, tenant_id, token_hash, created_at) VALUES (?, ?, ?, ?, ?)').run(
      input.id,
      input.listenerId,
      input.tenantId,
      input.tokenHash,
      input.now,
    );
  }

  async findToken(tokenHash: string): Promise<(ListenerTokenRecord & { token_hash: string }) | null> {
    const row = this.#sql('SELECT * FROM listener_tokens WHERE token_hash = ?').get(tokenHash) as Row | undefined;
    return row ? { ...toListenerToken(row), token_hash: row.token_hash as string } : null;
  }

  async listTokens(listenerId: string): Promise<ListenerTokenRecord[]> {
    return (this.#sql('SELECT * FROM listener_tokens WHERE listener_id = ? AND revoked_at IS NULL ORDER BY created_at').all(listenerId) as Row[]).map(toListenerToken);
  }

  async revokeToken(listenerId: string, tokenId: string, now: string): Promise<boolean> {
    return this.#sql('UPDATE listener_tokens SET revoked_at = ? WHERE id = ? AND listener_id = ? AND revoked_at IS NULL').run(now, tokenId, listenerId).changes > 0;
  }

  // ------------------------------------------------------------ which listener serves what

  async servingListener(deploymentId: string): Promise<ListenerRecord | null> {
    const row = this.#sql(`SELECT l.id, l.compute_type FROM deployments d JOIN listeners l ON l.id = ${SERVING_LISTENER} WHERE d.id = ?`).get(deploymentId) as Row | undefined;
    return row ? ({ id: row.id, compute_type: row.compute_type } as ListenerRecord) : null;
  }

  /** Sets the workspace's default listener; null means its first sandbox listener (the built-in default). */
  async setDefaultListener(workspaceId: string, listenerId: string | null): Promise<boolean> {
    const sandbox = `(SELECT l.id FROM listeners l WHERE l.tenant_id = @ws AND l.compute_type = 'sandbox' ORDER BY l.created_at, l.rowid LIMIT 1)`;
    return this.#sql(`UPDATE workspaces SET default_listener_id = COALESCE(@listener, ${sandbox}) WHERE id = @ws`).run({ listener: listenerId, ws: workspaceId }).changes > 0;
  }

  // ------------------------------------------------------------ claims

  /**
   * Claims the oldest free piece of work of the listener (a revision in an agent stage, or a
   * deployment being deleted), in one transaction: free means no claim or an expired lease.
   */
  async claimNext(input: { listenerId: string; agentId: string; claimId: string; now: string; leaseUntil: string }): Promise<ClaimRecord | null> {
    return this.#db.transaction((): ClaimRecord | null => {
      // Only agent-served listeners hand out work: a sandbox listener's revisions are the control plane's own.
      const listener = this.#sql('SELECT compute_type FROM listeners WHERE id = ?').get(input.listenerId) as { compute_type: string } | undefined;
      if (listener?.compute_type !== 'local' && listener?.compute_type !== 'k8s') return null;
      const free = `NOT EXISTS (SELECT 1 FROM agent_claims c WHERE c.work_key = %KEY% AND c.lease_expires_at > @now)`;
      const revision = this.#sql(
        `SELECT r.id, r.deployment_id FROM revisions r JOIN deployments d ON d.id = r.deployment_id
         WHERE r.status IN (${STAGES_SQL}) AND d.status != 'AWAITING_DELETE' AND ${SERVING_LISTENER} = @listener
           AND ${free.replace('%KEY%', "'revision:' || r.id")}
         ORDER BY r.seq LIMIT 1`,
      ).get({ listener: input.listenerId, now: input.now }) as Row | undefined;
      let claim: ClaimRecord | null = null;
      if (revision) {
        claim = { work_key: `revision:${revision.id as string}`, kind: 'revision', revision_id: revision.id as string, deployment_id: revision.deployment_id as string } as ClaimRecord;
      } else {
        const teardown = this.#sql(
          `SELECT d.id FROM deployments d WHERE d.status = 'AWAITING_DELETE' AND d.teardown_reported_at IS NULL AND ${SERVING_LISTENER} = @listener
             AND ${free.replace('%KEY%', "'teardown:' || d.id")}
           ORDER BY d.updated_at LIMIT 1`,
        ).get({ listener: input.listenerId, now: input.now }) as Row | undefined;
        if (teardown) claim = { work_key: `teardown:${teardown.id as string}`, kind: 'teardown', revision_id: null, deployment_id: teardown.id as string } as ClaimRecord;
      }
      if (!claim) return null;
      const full: ClaimRecord = { ...claim, claim_id: input.claimId, listener_id: input.listenerId, agent_id: input.agentId, lease_expires_at: input.leaseUntil, claimed_at: input.now };
      this.#sql(
        `INSERT OR REPLACE INTO agent_claims (work_key, claim_id, listener_id, kind, revision_id, deployment_id, agent_id, lease_expires_at, claimed_at)
         VALUES (@work_key, @claim_id, @listener_id, @kind, @revision_id, @deployment_id, @agent_id, @lease_expires_at, @claimed_at)`,
      ).run(full);
      return full;
    })();
  }

  /** The claim, when it is still this listener's (a lapsed lease taken by another agent has a new id). */
  async getClaim(listenerId: string, claimId: string): Promise<ClaimRecord | null> {
    const row = this.#sql('SELECT * FROM agent_claims WHERE claim_id = ? AND listener_id = ?').get(claimId, listenerId) as Row | undefined;
    return row ? (row as unknown as ClaimRecord) : null;
  }

  async renewClaim(claimId: string, leaseUntil: string): Promise<boolean> {
    return this.#sql('UPDATE agent_claims SET lease_expires_at = ? WHERE claim_id = ?').run(leaseUntil, claimId).changes > 0;
  }

  async releaseClaim(claimId: string): Promise<void> {
    this.#sql('DELETE FROM agent_claims WHERE claim_id = ?').run(claimId);
  }

  async recordTeardownDone(deploymentId: string, now: string, claimId?: string): Promise<void> {
    this.#db.transaction(() => {
      this.#sql("UPDATE deployments SET teardown_reported_at = ? WHERE id = ? AND status = 'AWAITING_DELETE' AND teardown_reported_at IS NULL").run(now, deploymentId);
      if (claimId !== undefined) this.#sql('DELETE FROM agent_claims WHERE claim_id = ?').run(claimId);
    })();
  }

  async teardownReported(deploymentId: string): Promise<boolean> {
    return this.#sql('SELECT 1 FROM deployments WHERE id = ? AND teardown_reported_at IS NOT NULL').get(deploymentId) !== undefined;
  }

  /** Records the commit an agent built on the revision (and on the deployment when it is the latest). */
  async setRevisionCommit(revisionId: string, sha: string, now: string): Promise<void> {
    this.#db.transaction(() => {
      this.#sql(
        `UPDATE revisions SET source_revision_config = json_set(source_revision_config, '$.repo_commit_sha', ?), version = version + 1, updated_at = ? WHERE id = ?`,
      ).run(sha, now, revisionId);
      this.#sql(`UPDATE deployments SET source_revision_config = json_set(source_revision_config, '$.repo_commit_sha', ?) WHERE latest_revision_id = ?`).run(sha, revisionId);
    })();
  }

  // ------------------------------------------------------------ heartbeats and silence

  /** Marks the listener heard from; its `UNKNOWN` deployments that have a live revision are `READY` again. */
  async agentPublicUrl(listenerId: string): Promise<string | null> {
    const row = this.#sql('SELECT agent_public_url FROM listeners WHERE id = ?').get(listenerId) as Row | undefined;
    return (row?.agent_public_url as string | null | undefined) ?? null;
  }

  async setCustomUrl(deploymentId: string, url: string, now: string): Promise<void> {
    this.#sql("UPDATE deployments SET source_config = json_set(source_config, '$.custom_url', ?), updated_at = ? WHERE id = ?").run(url, now, deploymentId);
  }

  async heard(input: { listenerId: string; now: string; version?: string; capacity?: number; publicUrl?: string | null }): Promise<string[]> {
    return this.#db.transaction((): string[] => {
      if (input.version !== undefined) {
        this.#sql('UPDATE listeners SET last_seen_at = ?, agent_version = ?, agent_capacity = ?, agent_public_url = ? WHERE id = ?').run(input.now, input.version, input.capacity ?? null, input.publicUrl ?? null, input.listenerId);
      } else {
        this.#sql('UPDATE listeners SET last_seen_at = ? WHERE id = ?').run(input.now, input.listenerId);
      }
      const back = (this.#sql(LEASE_QUERIES.servedInStatus).all({ listener: input.listenerId, status: 'UNKNOWN' }) as Row[]).filter((row) => row.active_revision_id !== null);
      for (const row of back) this.#sql("UPDATE deployments SET status = 'READY', updated_at = ? WHERE id = ? AND status = 'UNKNOWN'").run(input.now, row.id);
      return back.map((row) => row.id as string);
    })();
  }

  /**
   * `READY` deployments of agent listeners not heard from since `cutoff` become `UNKNOWN`. Starts
   * from the silent listeners (few, and none most of the time) and seeks their deployments.
   */
  async markSilent(cutoff: string, now: string): Promise<string[]> {
    return this.#db.transaction((): string[] => {
      const moved: string[] = [];
      for (const listener of this.#sql(LEASE_QUERIES.silentAgentListeners).all({ cutoff }) as Row[]) {
        for (const row of this.#sql(LEASE_QUERIES.servedInStatus).all({ listener: listener.id, status: 'READY' }) as Row[]) {
          if (this.#sql("UPDATE deployments SET status = 'UNKNOWN', updated_at = ? WHERE id = ? AND status = 'READY'").run(now, row.id).changes === 1) moved.push(row.id as string);
        }
      }
      return moved;
    })();
  }

  /** Deployments of the listener with a live revision, for an agent that restarts. */
  async liveDeployments(listenerId: string): Promise<Array<{ deploymentId: string; revisionId: string }>> {
    const rows = this.#sql(
      `SELECT d.id, d.active_revision_id FROM deployments d
       WHERE d.active_revision_id IS NOT NULL AND d.status != 'AWAITING_DELETE' AND ${SERVING_LISTENER} = ? ORDER BY d.created_at`,
    ).all(listenerId) as Row[];
    return rows.map((row) => ({ deploymentId: row.id as string, revisionId: row.active_revision_id as string }));
  }
}

export function toListenerToken(row: Row): ListenerTokenRecord {
  return {
    id: row.id as string,
    listener_id: row.listener_id as string,
    tenant_id: row.tenant_id as string,
    created_at: row.created_at as string,
    revoked: row.revoked_at !== null,
  };
}
