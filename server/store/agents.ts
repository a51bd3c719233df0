import type { Row } from './db.ts';
import { leaseQueries } from './queries/leases.ts';
import { columns } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { ListenerRecord } from './types.ts';

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
  /**
   * A heartbeat (or any call) of the listener's agent: records when it was heard, and its version and
   * capacity when given; its deployments marked UNKNOWN while it was silent are READY again (answered).
   */
  recordHeartbeat(input: { listenerId: string; now: string; version?: string; capacity?: number; publicUrl?: string | null }): Promise<string[]>;
  /** The URL template the listener's agent reported (`{name}` in it), or null. */
  agentPublicUrl(listenerId: string): Promise<string | null>;
  /** Sets a deployment's `custom_url` (the one its listener's agent serves it under). */
  setCustomUrl(deploymentId: string, url: string, now: string): Promise<void>;
  markSilent(cutoff: string, now: string): Promise<string[]>;
  liveDeployments(listenerId: string): Promise<Array<{ deploymentId: string; revisionId: string }>>;
}

/**
 * The listener-agent protocol's SQL: tokens, claims and leases, heartbeats, the silent-listener
 * sweep, on either database. A claim is taken with
 * `INSERT … ON CONFLICT … WHERE the lease has expired`: of two agents racing for one piece of work,
 * the second's write changes nothing and it looks again.
 */
export class SqlAgentStore extends SqlStore implements AgentStore {
  readonly #lease = leaseQueries(this.sql.dialect);

  // ------------------------------------------------------------ tokens

  async createToken(input: { id: string; listenerId: string; tenantId: string; tokenHash: string; now: string }): Promise<void> {
    await this.sql.run('INSERT INTO listener_tokens (id, listener_id, tenant_id, token_hash, created_at) VALUES (?, ?, ?, ?, ?)', [
      input.id,
      input.listenerId,
      input.tenantId,
      input.tokenHash,
      input.now,
    ]);
  }

  async findToken(tokenHash: string): Promise<(ListenerTokenRecord & { token_hash: string }) | null> {
    const row = await this.sql.row('SELECT * FROM listener_tokens WHERE token_hash = ?', [tokenHash]);
    return row ? { ...toListenerToken(row), token_hash: row.token_hash as string } : null;
  }

  async listTokens(listenerId: string): Promise<ListenerTokenRecord[]> {
    return (await this.sql.rows('SELECT * FROM listener_tokens WHERE listener_id = ? AND revoked_at IS NULL ORDER BY created_at', [listenerId])).map(
      toListenerToken,
    );
  }

  async revokeToken(listenerId: string, tokenId: string, now: string): Promise<boolean> {
    return (
      (await this.sql.run('UPDATE listener_tokens SET revoked_at = ? WHERE id = ? AND listener_id = ? AND revoked_at IS NULL', [now, tokenId, listenerId])) > 0
    );
  }

  // ------------------------------------------------------------ which listener serves what

  async servingListener(deploymentId: string): Promise<ListenerRecord | null> {
    const row = await this.sql.row(`SELECT l.id, l.compute_type FROM deployments d JOIN listeners l ON l.id = ${SERVING_LISTENER} WHERE d.id = ?`, [
      deploymentId,
    ]);
    return row ? ({ id: row.id, compute_type: row.compute_type } as ListenerRecord) : null;
  }

  async setDefaultListener(workspaceId: string, listenerId: string | null): Promise<boolean> {
    const sandbox = `(SELECT l.id FROM listeners l WHERE l.tenant_id = ? AND l.compute_type = 'sandbox' ORDER BY l.created_at, l.rowid LIMIT 1)`;
    return (
      (await this.sql.run(`UPDATE workspaces SET default_listener_id = COALESCE(CAST(? AS TEXT), ${sandbox}) WHERE id = ?`, [
        listenerId,
        workspaceId,
        workspaceId,
      ])) > 0
    );
  }

  // ------------------------------------------------------------ claims

  async claimNext(input: { listenerId: string; agentId: string; claimId: string; now: string; leaseUntil: string }): Promise<ClaimRecord | null> {
    // Only agent-served listeners hand out work: a sandbox listener's revisions are the control plane's own.
    const listener = await this.sql.row<{ compute_type: string }>('SELECT compute_type FROM listeners WHERE id = ?', [input.listenerId]);
    if (listener?.compute_type !== 'local' && listener?.compute_type !== 'k8s') return null;
    // A few rounds: a round only fails when another agent took the same work between our look and our write.
    for (let round = 0; round < 5; round++) {
      const claim = await this.#findFree(input.listenerId, input.now);
      if (!claim) return null;
      const full: ClaimRecord = {
        ...claim,
        claim_id: input.claimId,
        listener_id: input.listenerId,
        agent_id: input.agentId,
        lease_expires_at: input.leaseUntil,
        claimed_at: input.now,
      };
      const taken = await this.sql.run(
        `INSERT INTO agent_claims (work_key, claim_id, listener_id, kind, revision_id, deployment_id, agent_id, lease_expires_at, claimed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (work_key) DO UPDATE SET claim_id = excluded.claim_id, listener_id = excluded.listener_id, kind = excluded.kind,
           revision_id = excluded.revision_id, deployment_id = excluded.deployment_id, agent_id = excluded.agent_id,
           lease_expires_at = excluded.lease_expires_at, claimed_at = excluded.claimed_at
         WHERE agent_claims.lease_expires_at <= ?`,
        [
          full.work_key,
          full.claim_id,
          full.listener_id,
          full.kind,
          full.revision_id,
          full.deployment_id,
          full.agent_id,
          full.lease_expires_at,
          full.claimed_at,
          input.now,
        ],
      );
      if (taken === 1) return full;
    }
    return null;
  }

  async #findFree(listenerId: string, now: string): Promise<Pick<ClaimRecord, 'work_key' | 'kind' | 'revision_id' | 'deployment_id'> | null> {
    const free = (key: string) => `NOT EXISTS (SELECT 1 FROM agent_claims c WHERE c.work_key = ${key} AND c.lease_expires_at > ?)`;
    const revision = await this.sql.row(
      `SELECT r.id, r.deployment_id FROM revisions r JOIN deployments d ON d.id = r.deployment_id
       WHERE r.status IN (${STAGES_SQL}) AND d.status != 'AWAITING_DELETE' AND ${SERVING_LISTENER} = ?
         AND ${free("'revision:' || r.id")}
       ORDER BY r.seq LIMIT 1`,
      [listenerId, now],
    );
    if (revision)
      return {
        work_key: `revision:${revision.id as string}`,
        kind: 'revision',
        revision_id: revision.id as string,
        deployment_id: revision.deployment_id as string,
      };
    const teardown = await this.sql.row(
      `SELECT d.id FROM deployments d WHERE d.status = 'AWAITING_DELETE' AND d.teardown_reported_at IS NULL AND ${SERVING_LISTENER} = ?
         AND ${free("'teardown:' || d.id")}
       ORDER BY d.updated_at LIMIT 1`,
      [listenerId, now],
    );
    return teardown ? { work_key: `teardown:${teardown.id as string}`, kind: 'teardown', revision_id: null, deployment_id: teardown.id as string } : null;
  }

  async getClaim(listenerId: string, claimId: string): Promise<ClaimRecord | null> {
    const row = await this.sql.row('SELECT * FROM agent_claims WHERE claim_id = ? AND listener_id = ?', [claimId, listenerId]);
    return row ? (row as unknown as ClaimRecord) : null;
  }

  async renewClaim(claimId: string, leaseUntil: string): Promise<boolean> {
    return (await this.sql.run('UPDATE agent_claims SET lease_expires_at = ? WHERE claim_id = ?', [leaseUntil, claimId])) > 0;
  }

  async releaseClaim(claimId: string): Promise<void> {
    await this.sql.run('DELETE FROM agent_claims WHERE claim_id = ?', [claimId]);
  }

  async recordTeardownDone(deploymentId: string, now: string, claimId?: string): Promise<void> {
    await this.sql.tx(async (tx) => {
      await tx.run("UPDATE deployments SET teardown_reported_at = ? WHERE id = ? AND status = 'AWAITING_DELETE' AND teardown_reported_at IS NULL", [
        now,
        deploymentId,
      ]);
      if (claimId !== undefined) await tx.run('DELETE FROM agent_claims WHERE claim_id = ?', [claimId]);
    });
  }

  async teardownReported(deploymentId: string): Promise<boolean> {
    return (await this.sql.row('SELECT 1 AS reported FROM deployments WHERE id = ? AND teardown_reported_at IS NOT NULL', [deploymentId])) !== undefined;
  }

  async setRevisionCommit(revisionId: string, sha: string, now: string): Promise<void> {
    await this.sql.tx(async (tx) => {
      // Set in the stored text (parse, set, print), so the key order stays as SQLite's json_set keeps it.
      const revision = await tx.row<{ source_revision_config: string }>(`SELECT source_revision_config FROM revisions WHERE id = ?${tx.dialect.forUpdate}`, [
        revisionId,
      ]);
      if (revision) {
        await tx.run('UPDATE revisions SET source_revision_config = ?, version = version + 1, updated_at = ? WHERE id = ?', [
          withCommit(revision.source_revision_config, sha),
          now,
          revisionId,
        ]);
      }
      const deployments = await tx.rows<{ id: string; source_revision_config: string }>(
        `SELECT id, source_revision_config FROM deployments WHERE latest_revision_id = ?${tx.dialect.forUpdate}`,
        [revisionId],
      );
      for (const d of deployments)
        await tx.run('UPDATE deployments SET source_revision_config = ? WHERE id = ?', [withCommit(d.source_revision_config, sha), d.id]);
    });
  }

  // ------------------------------------------------------------ heartbeats and silence

  /** The URL template the listener's agent reported with its heartbeat (`{name}` in it), or null. */
  async agentPublicUrl(listenerId: string): Promise<string | null> {
    const row = await this.sql.row<{ agent_public_url: string | null }>('SELECT agent_public_url FROM listeners WHERE id = ?', [listenerId]);
    return row?.agent_public_url ?? null;
  }

  async setCustomUrl(deploymentId: string, url: string, now: string): Promise<void> {
    await this.sql.tx(async (tx) => {
      const row = await tx.row<{ source_config: string }>(`SELECT source_config FROM deployments WHERE id = ?${tx.dialect.forUpdate}`, [deploymentId]);
      if (!row) return;
      const sourceConfig = { ...(JSON.parse(row.source_config) as Record<string, unknown>), custom_url: url };
      await tx.run('UPDATE deployments SET source_config = ?, updated_at = ? WHERE id = ?', [JSON.stringify(sourceConfig), now, deploymentId]);
    });
  }

  async recordHeartbeat(input: { listenerId: string; now: string; version?: string; capacity?: number; publicUrl?: string | null }): Promise<string[]> {
    return this.sql.tx(async (tx) => {
      if (input.version !== undefined) {
        await tx.run('UPDATE listeners SET last_seen_at = ?, agent_version = ?, agent_capacity = ?, agent_public_url = ? WHERE id = ?', [
          input.now,
          input.version,
          input.capacity ?? null,
          input.publicUrl ?? null,
          input.listenerId,
        ]);
      } else {
        await tx.run('UPDATE listeners SET last_seen_at = ? WHERE id = ?', [input.now, input.listenerId]);
      }
      const back = (await tx.rows(this.#lease.servedInStatus, { listener: input.listenerId, status: 'UNKNOWN' })).filter(
        (row) => row.active_revision_id !== null,
      );
      const moved: string[] = [];
      for (const row of back) {
        if ((await tx.run("UPDATE deployments SET status = 'READY', updated_at = ? WHERE id = ? AND status = 'UNKNOWN'", [input.now, row.id])) === 1)
          moved.push(row.id as string);
      }
      return moved;
    });
  }

  /** From the silent agent listeners to their deployments, each an index seek. */
  async markSilent(cutoff: string, now: string): Promise<string[]> {
    return this.sql.tx(async (tx) => {
      const moved: string[] = [];
      for (const listener of await tx.rows(this.#lease.silentAgentListeners, { cutoff })) {
        for (const row of await tx.rows(this.#lease.servedInStatus, { listener: listener.id, status: 'READY' })) {
          if ((await tx.run("UPDATE deployments SET status = 'UNKNOWN', updated_at = ? WHERE id = ? AND status = 'READY'", [now, row.id])) === 1)
            moved.push(row.id as string);
        }
      }
      return moved;
    });
  }

  async liveDeployments(listenerId: string): Promise<Array<{ deploymentId: string; revisionId: string }>> {
    const rows = await this.sql.rows<Row>(
      `SELECT d.id, d.active_revision_id FROM deployments d
       WHERE d.active_revision_id IS NOT NULL AND d.status != 'AWAITING_DELETE' AND ${SERVING_LISTENER} = ? ORDER BY d.created_at`,
      [listenerId],
    );
    return rows.map((row) => ({ deploymentId: row.id as string, revisionId: row.active_revision_id as string }));
  }
}

export function toListenerToken(row: Row): ListenerTokenRecord {
  return { ...columns(row, { id: 'text', listener_id: 'text', tenant_id: 'text', created_at: 'text' }), revoked: row.revoked_at !== null };
}

function withCommit(configText: string, sha: string): string {
  const config = JSON.parse(configText) as Record<string, unknown>;
  config.repo_commit_sha = sha;
  return JSON.stringify(config);
}
