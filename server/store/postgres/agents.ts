import { SERVING_LISTENER, STAGES_SQL, toListenerToken, type AgentStore, type ClaimRecord, type ListenerTokenRecord } from '../agents.ts';
import type { ListenerRecord } from '../types.ts';
import type { PgDb, Row } from './db.ts';

/** The deployments a listener serves in a status (SQLite's `LEASE_QUERIES.servedInStatus`, kept equivalent): listener, status, listener, status. */
const SERVED_IN_STATUS = `SELECT id, active_revision_id FROM deployments WHERE listener_id = ? AND status = ?
  UNION ALL
  SELECT d.id, d.active_revision_id FROM workspaces w JOIN deployments d ON d.tenant_id = w.id
  WHERE w.default_listener_id = ? AND d.listener_id IS NULL AND d.status = ?`;

/**
 * The listener-agent protocol's SQL on PostgreSQL (mirrors `../agents.ts`). A claim is taken with
 * `INSERT … ON CONFLICT … WHERE the lease has expired`: of two agents racing for one piece of work,
 * the second's write changes nothing and it looks again.
 */
export class PgAgentStore implements AgentStore {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  // ------------------------------------------------------------ tokens

  async createToken(input: { id: string; listenerId: string; tenantId: string; tokenHash: string; now: string }): Promise<void> {
    await this.#db.run('INSERT INTO listener_tokens (id, listener_id, tenant_id, token_hash, created_at) VALUES (?, ?, ?, ?, ?)', [input.id, input.listenerId, input.tenantId, input.tokenHash, input.now]);
  }

  async findToken(tokenHash: string): Promise<(ListenerTokenRecord & { token_hash: string }) | null> {
    const row = await this.#db.row('SELECT * FROM listener_tokens WHERE token_hash = ?', [tokenHash]);
    return row ? { ...toListenerToken(row), token_hash: row.token_hash as string } : null;
  }

  async listTokens(listenerId: string): Promise<ListenerTokenRecord[]> {
    return (await this.#db.rows('SELECT * FROM listener_tokens WHERE listener_id = ? AND revoked_at IS NULL ORDER BY created_at', [listenerId])).map(toListenerToken);
  }

  async revokeToken(listenerId: string, tokenId: string, now: string): Promise<boolean> {
    return (await this.#db.run('UPDATE listener_tokens SET revoked_at = ? WHERE id = ? AND listener_id = ? AND revoked_at IS NULL', [now, tokenId, listenerId])) > 0;
  }

  // ------------------------------------------------------------ which listener serves what

  async servingListener(deploymentId: string): Promise<ListenerRecord | null> {
    const row = await this.#db.row(`SELECT l.id, l.compute_type FROM deployments d JOIN listeners l ON l.id = ${SERVING_LISTENER} WHERE d.id = ?`, [deploymentId]);
    return row ? ({ id: row.id, compute_type: row.compute_type } as ListenerRecord) : null;
  }

  async setDefaultListener(workspaceId: string, listenerId: string | null): Promise<boolean> {
    const sandbox = `(SELECT l.id FROM listeners l WHERE l.tenant_id = ? AND l.compute_type = 'sandbox' ORDER BY l.created_at, l.rowid LIMIT 1)`;
    return (await this.#db.run(`UPDATE workspaces SET default_listener_id = COALESCE(?::text, ${sandbox}) WHERE id = ?`, [listenerId, workspaceId, workspaceId])) > 0;
  }

  // ------------------------------------------------------------ claims

  async claimNext(input: { listenerId: string; agentId: string; claimId: string; now: string; leaseUntil: string }): Promise<ClaimRecord | null> {
    // Only agent-served listeners hand out work: a sandbox listener's revisions are the control plane's own.
    const listener = await this.#db.row<{ compute_type: string }>('SELECT compute_type FROM listeners WHERE id = ?', [input.listenerId]);
    if (listener?.compute_type !== 'local' && listener?.compute_type !== 'k8s') return null;
    // A few rounds: a round only fails when another agent took the same work between our look and our write.
    for (let round = 0; round < 5; round++) {
      const claim = await this.#findFree(input.listenerId, input.now);
      if (!claim) return null;
      const full: ClaimRecord = { ...claim, claim_id: input.claimId, listener_id: input.listenerId, agent_id: input.agentId, lease_expires_at: input.leaseUntil, claimed_at: input.now };
      const taken = await this.#db.run(
        `INSERT INTO agent_claims (work_key, claim_id, listener_id, kind, revision_id, deployment_id, agent_id, lease_expires_at, claimed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (work_key) DO UPDATE SET claim_id = excluded.claim_id, listener_id = excluded.listener_id, kind = excluded.kind,
           revision_id = excluded.revision_id, deployment_id = excluded.deployment_id, agent_id = excluded.agent_id,
           lease_expires_at = excluded.lease_expires_at, claimed_at = excluded.claimed_at
         WHERE agent_claims.lease_expires_at <= ?`,
        [full.work_key, full.claim_id, full.listener_id, full.kind, full.revision_id, full.deployment_id, full.agent_id, full.lease_expires_at, full.claimed_at, input.now],
      );
      if (taken === 1) return full;
    }
    return null;
  }

  async #findFree(listenerId: string, now: string): Promise<Pick<ClaimRecord, 'work_key' | 'kind' | 'revision_id' | 'deployment_id'> | null> {
    const free = (key: string) => `NOT EXISTS (SELECT 1 FROM agent_claims c WHERE c.work_key = ${key} AND c.lease_expires_at > ?)`;
    const revision = await this.#db.row(
      `SELECT r.id, r.deployment_id FROM revisions r JOIN deployments d ON d.id = r.deployment_id
       WHERE r.status IN (${STAGES_SQL}) AND d.status != 'AWAITING_DELETE' AND ${SERVING_LISTENER} = ?
         AND ${free("'revision:' || r.id")}
       ORDER BY r.seq LIMIT 1`,
      [listenerId, now],
    );
    if (revision) return { work_key: `revision:${revision.id as string}`, kind: 'revision', revision_id: revision.id as string, deployment_id: revision.deployment_id as string };
    const teardown = await this.#db.row(
      `SELECT d.id FROM deployments d WHERE d.status = 'AWAITING_DELETE' AND d.teardown_reported_at IS NULL AND ${SERVING_LISTENER} = ?
         AND ${free("'teardown:' || d.id")}
       ORDER BY d.updated_at LIMIT 1`,
      [listenerId, now],
    );
    return teardown ? { work_key: `teardown:${teardown.id as string}`, kind: 'teardown', revision_id: null, deployment_id: teardown.id as string } : null;
  }

  async getClaim(listenerId: string, claimId: string): Promise<ClaimRecord | null> {
    const row = await this.#db.row('SELECT * FROM agent_claims WHERE claim_id = ? AND listener_id = ?', [claimId, listenerId]);
    return row ? (row as unknown as ClaimRecord) : null;
  }

  async renewClaim(claimId: string, leaseUntil: string): Promise<boolean> {
    return (await this.#db.run('UPDATE agent_claims SET lease_expires_at = ? WHERE claim_id = ?', [leaseUntil, claimId])) > 0;
  }

  async releaseClaim(claimId: string): Promise<void> {
    await this.#db.run('DELETE FROM agent_claims WHERE claim_id = ?', [claimId]);
  }

  async recordTeardownDone(deploymentId: string, now: string, claimId?: string): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      await db.run("UPDATE deployments SET teardown_reported_at = ? WHERE id = ? AND status = 'AWAITING_DELETE' AND teardown_reported_at IS NULL", [now, deploymentId], c);
      if (claimId !== undefined) await db.run('DELETE FROM agent_claims WHERE claim_id = ?', [claimId], c);
    });
  }

  async teardownReported(deploymentId: string): Promise<boolean> {
    return (await this.#db.row('SELECT 1 AS reported FROM deployments WHERE id = ? AND teardown_reported_at IS NOT NULL', [deploymentId])) !== undefined;
  }

  async setRevisionCommit(revisionId: string, sha: string, now: string): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      // Set in the stored text (parse, set, print), so the key order stays as SQLite's json_set keeps it.
      const revision = await db.row<{ source_revision_config: string }>('SELECT source_revision_config FROM revisions WHERE id = ? FOR UPDATE', [revisionId], c);
      if (revision) {
        await db.run('UPDATE revisions SET source_revision_config = ?, version = version + 1, updated_at = ? WHERE id = ?', [withCommit(revision.source_revision_config, sha), now, revisionId], c);
      }
      const deployments = await db.rows<{ id: string; source_revision_config: string }>('SELECT id, source_revision_config FROM deployments WHERE latest_revision_id = ? FOR UPDATE', [revisionId], c);
      for (const d of deployments) await db.run('UPDATE deployments SET source_revision_config = ? WHERE id = ?', [withCommit(d.source_revision_config, sha), d.id], c);
    });
  }

  // ------------------------------------------------------------ heartbeats and silence

  async agentPublicUrl(listenerId: string): Promise<string | null> {
    const rows = await this.#db.rows<{ agent_public_url: string | null }>('SELECT agent_public_url FROM listeners WHERE id = ?', [listenerId]);
    return rows[0]?.agent_public_url ?? null;
  }

  async setCustomUrl(deploymentId: string, url: string, now: string): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      const rows = await db.rows<{ source_config: string }>('SELECT source_config FROM deployments WHERE id = ? FOR UPDATE', [deploymentId], c);
      if (!rows[0]) return;
      const config = JSON.parse(rows[0].source_config) as Record<string, unknown>;
      await db.run('UPDATE deployments SET source_config = ?, updated_at = ? WHERE id = ?', [JSON.stringify({ ...config, custom_url: url }), now, deploymentId], c);
    });
  }

  async heard(input: { listenerId: string; now: string; version?: string; capacity?: number; publicUrl?: string | null }): Promise<string[]> {
    const db = this.#db;
    return db.tx(async (c) => {
      if (input.version !== undefined) {
        await db.run('UPDATE listeners SET last_seen_at = ?, agent_version = ?, agent_capacity = ?, agent_public_url = ? WHERE id = ?', [input.now, input.version, input.capacity ?? null, input.publicUrl ?? null, input.listenerId], c);
      } else {
        await db.run('UPDATE listeners SET last_seen_at = ? WHERE id = ?', [input.now, input.listenerId], c);
      }
      const back = (await db.rows(SERVED_IN_STATUS, [input.listenerId, 'UNKNOWN', input.listenerId, 'UNKNOWN'], c)).filter((row) => row.active_revision_id !== null);
      const moved: string[] = [];
      for (const row of back) {
        if ((await db.run("UPDATE deployments SET status = 'READY', updated_at = ? WHERE id = ? AND status = 'UNKNOWN'", [input.now, row.id], c)) === 1) moved.push(row.id as string);
      }
      return moved;
    });
  }

  /** As SQLite's: from the silent agent listeners to their deployments, each an index seek. */
  async markSilent(cutoff: string, now: string): Promise<string[]> {
    const db = this.#db;
    return db.tx(async (c) => {
      const moved: string[] = [];
      for (const listener of await db.rows("SELECT id FROM listeners WHERE compute_type IN ('local', 'k8s') AND last_seen_at < ?", [cutoff], c)) {
        for (const row of await db.rows(SERVED_IN_STATUS, [listener.id, 'READY', listener.id, 'READY'], c)) {
          if ((await db.run("UPDATE deployments SET status = 'UNKNOWN', updated_at = ? WHERE id = ? AND status = 'READY'", [now, row.id], c)) === 1) moved.push(row.id as string);
        }
      }
      return moved;
    });
  }

  async liveDeployments(listenerId: string): Promise<Array<{ deploymentId: string; revisionId: string }>> {
    const rows = await this.#db.rows<Row>(
      `SELECT d.id, d.active_revision_id FROM deployments d
       WHERE d.active_revision_id IS NOT NULL AND d.status != 'AWAITING_DELETE' AND ${SERVING_LISTENER} = ? ORDER BY d.created_at`,
      [listenerId],
    );
    return rows.map((row) => ({ deploymentId: row.id as string, revisionId: row.active_revision_id as string }));
  }
}

function withCommit(configText: string, sha: string): string {
  const config = JSON.parse(configText) as Record<string, unknown>;
  config.repo_commit_sha = sha;
  return JSON.stringify(config);
}
