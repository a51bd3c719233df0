import type { WebhookDeliveryListQuery, WebhookDeliveryResultKind } from '../../shared/schemas/webhook-delivery.ts';
import { hotQueries, SET_RECONCILE_HEAD } from './queries/hot-paths.ts';
import { toStoredDelivery } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { WorkLease } from './types.ts';

export type DeliveryStatus = 'pending' | 'processed' | 'failed';
/** Delivery-wide outcome as stored; the log narrows it to one workspace's view. */
export type StoredOutcome = 'pending' | 'push' | 'applied' | 'ignored' | 'failed';

export type NewDelivery = {
  /**
   * The key a delivery counts once under: GitHub's `X-GitHub-Delivery` for the App's deliveries,
   * prefixed with the workspace for a workspace's (see `deliveryKey`).
   */
  delivery_id: string;
  event: string;
  action: string | null;
  installation_id: number | null;
  repository: string | null;
  ref: string | null;
  after_sha: string | null;
  /**
   * The workspace a repository-webhook delivery was verified for (with its own secret), or null for
   * the GitHub App's deliveries, which are addressed by their installation.
   */
  workspace_id: string | null;
  /** The verified body, kept until the delivery is processed. */
  payload: string;
  received_at: string;
  /** A delivery that needs no processing (ping) is stored already done. */
  done?: { outcome: StoredOutcome; reason: string | null };
};

export type PendingDelivery = { delivery_id: string; event: string; workspace_id: string | null; payload: string; attempts: number; received_at: string };

export type DeliveryResultLine = {
  tenant_id: string;
  deployment_id: string | null;
  deployment_name: string | null;
  integration_id: string | null;
  result: WebhookDeliveryResultKind;
  revision_id: string | null;
  reason: string | null;
};

/** A delivery as the log reads it: what was received (less the body), and what came of it. */
export type StoredDelivery = Omit<NewDelivery, 'payload' | 'done' | 'workspace_id'> & {
  status: DeliveryStatus;
  outcome: StoredOutcome;
  reason: string | null;
  processed_at: string | null;
  results: DeliveryResultLine[];
};

/** Storage of GitHub webhook deliveries and of the reconciler's branch heads. */
export interface WebhookStore {
  /**
   * Stores a delivery (pending unless `done`) and makes it visible to the workspaces it is addressed
   * to (its `workspace_id`, or else those linked to its installation), in one transaction. False
   * when a delivery with that id was already stored.
   */
  insertDelivery(delivery: NewDelivery): Promise<boolean>;
  /** The workspaces that linked this GitHub App installation: those an App delivery naming it is addressed to. */
  tenantsOfInstallation(installationId: number): Promise<string[]>;
  /** Pending deliveries received at or before `dueBy`, oldest first. */
  listPending(dueBy: string, limit: number): Promise<PendingDelivery[]>;
  /**
   * Claims up to `limit` pending deliveries received at or before `dueBy` that nobody holds (or
   * whose holder's lease has passed) for `lease.owner` until `lease.until`, oldest first: of
   * processes claiming at once, each delivery goes to one. A failed attempt keeps its claim, so it
   * is retried (by any process) once the lease has passed.
   */
  claimPending(dueBy: string, limit: number, lease: WorkLease): Promise<PendingDelivery[]>;
  /** When the oldest pending delivery was received; null when none is pending. */
  oldestPendingReceivedAt(): Promise<string | null>;
  /** Records what a delivery did, makes it visible to the workspaces it touched, and drops its body. */
  completeDelivery(deliveryId: string, done: { outcome: StoredOutcome; reason: string | null; results: DeliveryResultLine[]; now: string }): Promise<void>;
  /** Counts a failed attempt; with `giveUp` the delivery is marked failed and not retried. */
  recordFailedAttempt(deliveryId: string, reason: string, giveUp: boolean, now: string): Promise<void>;
  /**
   * A workspace's view: deliveries visible to it, newest first, with only its own result lines;
   * `deliveryKeys` narrows it to those keys.
   */
  listForTenant(
    tenantId: string,
    query: Omit<WebhookDeliveryListQuery, 'delivery_id'> & { deliveryKeys?: string[] },
  ): Promise<{ resources: StoredDelivery[]; offset: number }>;
  /** Removes processed deliveries received before `before`; pending ones are always kept. */
  pruneDeliveries(before: string): Promise<number>;

  getReconcileHead(deploymentId: string): Promise<{ repo_ref: string; sha: string; seen_at: string } | null>;
  setReconcileHead(deploymentId: string, repoRef: string, sha: string, now: string): Promise<void>;
}

/** GitHub webhook deliveries and the reconciler's branch heads, on either database. */
export class SqlWebhookStore extends SqlStore implements WebhookStore {
  readonly #hot = hotQueries(this.sql.dialect);

  async insertDelivery(d: NewDelivery): Promise<boolean> {
    return this.sql.tx(async (tx) => {
      // The unique delivery id makes a redelivery (or the same delivery racing itself) count once.
      const inserted = await tx.run(
        `INSERT INTO webhook_deliveries (delivery_id, event, action, installation_id, repository, ref, after_sha, workspace_id, payload, status, summary, received_at, processed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (delivery_id) DO NOTHING`,
        [
          d.delivery_id,
          d.event,
          d.action,
          d.installation_id,
          d.repository,
          d.ref,
          d.after_sha,
          d.workspace_id,
          d.done ? null : d.payload,
          d.done ? 'processed' : 'pending',
          d.done ? JSON.stringify({ outcome: d.done.outcome, reason: d.done.reason }) : null,
          d.received_at,
          d.done ? d.received_at : null,
        ],
      );
      if (inserted === 0) return false;
      if (d.workspace_id !== null) {
        await tx.run('INSERT INTO webhook_delivery_tenants (delivery_id, tenant_id) VALUES (?, ?) ON CONFLICT DO NOTHING', [d.delivery_id, d.workspace_id]);
      } else if (d.installation_id !== null) {
        await tx.run(
          `INSERT INTO webhook_delivery_tenants (delivery_id, tenant_id)
           SELECT DISTINCT CAST(? AS TEXT), tenant_id FROM github_integrations WHERE installation_id = ? ON CONFLICT DO NOTHING`,
          [d.delivery_id, d.installation_id],
        );
      }
      return true;
    });
  }

  async tenantsOfInstallation(installationId: number): Promise<string[]> {
    const rows = await this.sql.rows<{ tenant_id: string }>(this.#hot.tenantsOfInstallation, [installationId]);
    return rows.map((r) => r.tenant_id);
  }

  async listPending(dueBy: string, limit: number): Promise<PendingDelivery[]> {
    return this.sql.rows<PendingDelivery>(this.#hot.pendingDeliveries, [dueBy, limit]);
  }

  async claimPending(dueBy: string, limit: number, lease: WorkLease): Promise<PendingDelivery[]> {
    const rows = await this.sql.rows<PendingDelivery & { seq: number }>(this.#hot.claimPendingDeliveries, {
      owner: lease.owner,
      until: lease.until,
      now: lease.now,
      due_by: dueBy,
      limit,
    });
    return inOrder(rows);
  }

  async oldestPendingReceivedAt(): Promise<string | null> {
    return (await this.sql.row<{ at: string | null }>(this.#hot.oldestPendingDelivery))?.at ?? null;
  }

  async completeDelivery(
    deliveryId: string,
    done: { outcome: StoredOutcome; reason: string | null; results: DeliveryResultLine[]; now: string },
  ): Promise<void> {
    await this.sql.tx(async (tx) => {
      // A delivery processed again after a crash replaces what the interrupted attempt wrote.
      await tx.run(this.#hot.deleteDeliveryResults, [deliveryId]);
      for (const line of done.results) {
        await tx.run(
          `INSERT INTO webhook_delivery_results (delivery_id, tenant_id, deployment_id, deployment_name, integration_id, result, revision_id, reason)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          [deliveryId, line.tenant_id, line.deployment_id, line.deployment_name, line.integration_id, line.result, line.revision_id, line.reason],
        );
        await tx.run('INSERT INTO webhook_delivery_tenants (delivery_id, tenant_id) VALUES (?, ?) ON CONFLICT DO NOTHING', [deliveryId, line.tenant_id]);
      }
      await tx.run(this.#hot.completeDelivery, [JSON.stringify({ outcome: done.outcome, reason: done.reason }), done.now, deliveryId]);
    });
  }

  async recordFailedAttempt(deliveryId: string, reason: string, giveUp: boolean, now: string): Promise<void> {
    if (giveUp) {
      await this.sql.run("UPDATE webhook_deliveries SET attempts = attempts + 1, status = 'failed', summary = ?, processed_at = ? WHERE delivery_id = ?", [
        JSON.stringify({ outcome: 'failed', reason }),
        now,
        deliveryId,
      ]);
    } else {
      await this.sql.run('UPDATE webhook_deliveries SET attempts = attempts + 1 WHERE delivery_id = ?', [deliveryId]);
    }
  }

  async listForTenant(
    tenantId: string,
    query: Omit<WebhookDeliveryListQuery, 'delivery_id'> & { deliveryKeys?: string[] },
  ): Promise<{ resources: StoredDelivery[]; offset: number }> {
    const { dialect } = this.sql;
    const rows = await this.sql.rows(
      `SELECT d.* FROM webhook_delivery_tenants t JOIN webhook_deliveries d ON d.delivery_id = t.delivery_id
       WHERE t.tenant_id = @tenant_id${query.event ? ' AND d.event = @event' : ''}${query.deliveryKeys ? ` AND ${dialect.inList('d.delivery_id', '@keys')}` : ''}
       ORDER BY d.seq DESC LIMIT @limit OFFSET @offset`,
      { tenant_id: tenantId, event: query.event ?? null, keys: dialect.list(query.deliveryKeys ?? []), limit: query.limit, offset: query.offset },
    );
    const resources: StoredDelivery[] = [];
    for (const row of rows) {
      const lines = await this.sql.rows('SELECT * FROM webhook_delivery_results WHERE delivery_id = ? AND tenant_id = ? ORDER BY seq', [
        row.delivery_id,
        tenantId,
      ]);
      resources.push(toStoredDelivery(row, lines));
    }
    return { resources, offset: query.offset + rows.length };
  }

  async pruneDeliveries(before: string): Promise<number> {
    return this.sql.tx(async (tx) => {
      const old = "SELECT delivery_id FROM webhook_deliveries WHERE received_at < ? AND status <> 'pending'";
      await tx.run(`DELETE FROM webhook_delivery_results WHERE delivery_id IN (${old})`, [before]);
      await tx.run(`DELETE FROM webhook_delivery_tenants WHERE delivery_id IN (${old})`, [before]);
      return tx.run("DELETE FROM webhook_deliveries WHERE received_at < ? AND status <> 'pending'", [before]);
    });
  }

  async getReconcileHead(deploymentId: string): Promise<{ repo_ref: string; sha: string; seen_at: string } | null> {
    return (await this.sql.row<{ repo_ref: string; sha: string; seen_at: string }>(this.#hot.reconcileHead, [deploymentId])) ?? null;
  }

  async setReconcileHead(deploymentId: string, repoRef: string, sha: string, now: string): Promise<void> {
    await this.sql.run(SET_RECONCILE_HEAD, [deploymentId, repoRef, sha, now]);
  }
}

/** Claimed rows in the order they were received (RETURNING promises no order), without their `seq`. */
export function inOrder(rows: Array<PendingDelivery & { seq: number }>): PendingDelivery[] {
  return rows.sort((a, b) => a.seq - b.seq).map(({ seq: _seq, ...delivery }) => delivery);
}
