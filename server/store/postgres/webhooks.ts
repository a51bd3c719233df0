import type { WebhookDeliveryListQuery } from '../../../shared/schemas/webhook-delivery.ts';
import { inOrder, type DeliveryResultLine, type NewDelivery, type PendingDelivery, type StoredDelivery, type StoredOutcome, type WebhookStore } from '../webhooks.ts';
import type { WorkLease } from '../types.ts';
import { toStoredDelivery } from '../rows.ts';
import { SET_RECONCILE_HEAD } from '../hot-queries.ts';
import type { PgDb } from './db.ts';

/** GitHub webhook deliveries and the reconciler's branch heads on PostgreSQL (mirrors `../webhooks.ts`). */
export class PgWebhookStore implements WebhookStore {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async insertDelivery(d: NewDelivery): Promise<boolean> {
    const db = this.#db;
    return db.tx(async (c) => {
      // The unique delivery id makes a redelivery (or the same delivery racing itself) count once.
      const inserted = await db.run(
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
        c,
      );
      if (inserted === 0) return false;
      if (d.workspace_id !== null) {
        await db.run('INSERT INTO webhook_delivery_tenants (delivery_id, tenant_id) VALUES (?, ?) ON CONFLICT DO NOTHING', [d.delivery_id, d.workspace_id], c);
      } else if (d.installation_id !== null) {
        await db.run(
          `INSERT INTO webhook_delivery_tenants (delivery_id, tenant_id)
           SELECT DISTINCT ?::text, tenant_id FROM github_integrations WHERE installation_id = ? ON CONFLICT DO NOTHING`,
          [d.delivery_id, d.installation_id],
          c,
        );
      }
      return true;
    });
  }

  async tenantsOfInstallation(installationId: number): Promise<string[]> {
    const rows = await this.#db.rows<{ tenant_id: string }>('SELECT DISTINCT tenant_id FROM github_integrations WHERE installation_id = ?', [installationId]);
    return rows.map((r) => r.tenant_id);
  }

  async listPending(dueBy: string, limit: number): Promise<PendingDelivery[]> {
    return this.#db.rows<PendingDelivery>(
      `SELECT delivery_id, event, workspace_id, payload, attempts, received_at FROM webhook_deliveries
       WHERE status = 'pending' AND received_at <= ? ORDER BY seq LIMIT ?`,
      [dueBy, limit],
    );
  }

  async claimPending(dueBy: string, limit: number, lease: WorkLease): Promise<PendingDelivery[]> {
    // SKIP LOCKED: workers claiming at once take disjoint deliveries instead of waiting on each
    // other; the outer condition is checked again on each locked row, so none is claimed twice.
    const free = "status = 'pending' AND received_at <= ? AND (claim_expires_at IS NULL OR claim_expires_at < ?)";
    const rows = await this.#db.rows<PendingDelivery & { seq: number }>(
      `UPDATE webhook_deliveries SET claimed_by = ?, claim_expires_at = ?
       WHERE seq IN (SELECT seq FROM webhook_deliveries WHERE ${free} ORDER BY seq LIMIT ? FOR UPDATE SKIP LOCKED) AND ${free}
       RETURNING seq, delivery_id, event, workspace_id, payload, attempts, received_at`,
      [lease.owner, lease.until, dueBy, lease.now, limit, dueBy, lease.now],
    );
    return inOrder(rows);
  }

  async oldestPendingReceivedAt(): Promise<string | null> {
    return (await this.#db.row<{ at: string | null }>("SELECT min(received_at) AS at FROM webhook_deliveries WHERE status = 'pending'"))?.at ?? null;
  }

  async completeDelivery(deliveryId: string, done: { outcome: StoredOutcome; reason: string | null; results: DeliveryResultLine[]; now: string }): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      // A delivery processed again after a crash replaces what the interrupted attempt wrote.
      await db.run('DELETE FROM webhook_delivery_results WHERE delivery_id = ?', [deliveryId], c);
      for (const line of done.results) {
        await db.run(
          `INSERT INTO webhook_delivery_results (delivery_id, tenant_id, deployment_id, deployment_name, integration_id, result, revision_id, reason)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          [deliveryId, line.tenant_id, line.deployment_id, line.deployment_name, line.integration_id, line.result, line.revision_id, line.reason],
          c,
        );
        await db.run('INSERT INTO webhook_delivery_tenants (delivery_id, tenant_id) VALUES (?, ?) ON CONFLICT DO NOTHING', [deliveryId, line.tenant_id], c);
      }
      await db.run(
        `UPDATE webhook_deliveries SET status = 'processed', summary = ?, processed_at = ?, payload = NULL, attempts = attempts + 1
         WHERE delivery_id = ?`,
        [JSON.stringify({ outcome: done.outcome, reason: done.reason }), done.now, deliveryId],
        c,
      );
    });
  }

  async recordFailedAttempt(deliveryId: string, reason: string, giveUp: boolean, now: string): Promise<void> {
    if (giveUp) {
      await this.#db.run("UPDATE webhook_deliveries SET attempts = attempts + 1, status = 'failed', summary = ?, processed_at = ? WHERE delivery_id = ?", [
        JSON.stringify({ outcome: 'failed', reason }),
        now,
        deliveryId,
      ]);
    } else {
      await this.#db.run('UPDATE webhook_deliveries SET attempts = attempts + 1 WHERE delivery_id = ?', [deliveryId]);
    }
  }

  async listForTenant(tenantId: string, query: Omit<WebhookDeliveryListQuery, 'delivery_id'> & { deliveryKeys?: string[] }): Promise<{ resources: StoredDelivery[]; offset: number }> {
    const db = this.#db;
    const rows = await db.rows(
      `SELECT d.* FROM webhook_delivery_tenants t JOIN webhook_deliveries d ON d.delivery_id = t.delivery_id
       WHERE t.tenant_id = ? AND (?::text IS NULL OR d.event = ?) AND (?::text[] IS NULL OR d.delivery_id = ANY(?::text[]))
       ORDER BY d.seq DESC LIMIT ? OFFSET ?`,
      [tenantId, query.event ?? null, query.event ?? null, query.deliveryKeys ?? null, query.deliveryKeys ?? null, query.limit, query.offset],
    );
    const resources: StoredDelivery[] = [];
    for (const row of rows) {
      const lines = await db.rows('SELECT * FROM webhook_delivery_results WHERE delivery_id = ? AND tenant_id = ? ORDER BY seq', [row.delivery_id, tenantId]);
      resources.push(toStoredDelivery(row, lines));
    }
    return { resources, offset: query.offset + rows.length };
  }

  async pruneDeliveries(before: string): Promise<number> {
    const db = this.#db;
    return db.tx(async (c) => {
      const old = "SELECT delivery_id FROM webhook_deliveries WHERE received_at < ? AND status <> 'pending'";
      await db.run(`DELETE FROM webhook_delivery_results WHERE delivery_id IN (${old})`, [before], c);
      await db.run(`DELETE FROM webhook_delivery_tenants WHERE delivery_id IN (${old})`, [before], c);
      return db.run("DELETE FROM webhook_deliveries WHERE received_at < ? AND status <> 'pending'", [before], c);
    });
  }

  async getReconcileHead(deploymentId: string): Promise<{ repo_ref: string; sha: string; seen_at: string } | null> {
    return (await this.#db.row<{ repo_ref: string; sha: string; seen_at: string }>('SELECT repo_ref, sha, seen_at FROM reconcile_heads WHERE deployment_id = ?', [deploymentId])) ?? null;
  }

  async setReconcileHead(deploymentId: string, repoRef: string, sha: string, now: string): Promise<void> {
    await this.#db.run(SET_RECONCILE_HEAD, [deploymentId, repoRef, sha, now]);
  }
}

