import type Database from 'better-sqlite3';
import type { WebhookDeliveryListQuery, WebhookDeliveryResultKind } from '../../shared/schemas/webhook-delivery.ts';
import { HOT_QUERIES, SET_RECONCILE_HEAD } from './hot-queries.ts';
import { toStoredDelivery } from './rows.ts';
import type { WorkLease } from './types.ts';

type Row = Record<string, unknown>;

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
  listForTenant(tenantId: string, query: Omit<WebhookDeliveryListQuery, 'delivery_id'> & { deliveryKeys?: string[] }): Promise<{ resources: StoredDelivery[]; offset: number }>;
  /** Removes processed deliveries received before `before`; pending ones are always kept. */
  pruneDeliveries(before: string): Promise<number>;

  getReconcileHead(deploymentId: string): Promise<{ repo_ref: string; sha: string; seen_at: string } | null>;
  setReconcileHead(deploymentId: string, repoRef: string, sha: string, now: string): Promise<void>;
}

/**
 * The delivery processor's and worker's statements, each prepared once: preparing one costs more
 * than running it (parsing, planning), and these run several times per delivery.
 */
function prepareStatements(db: Database.Database) {
  return {
    insertDelivery: db.prepare(
      `INSERT INTO webhook_deliveries (delivery_id, event, action, installation_id, repository, ref, after_sha, workspace_id, payload, status, summary, received_at, processed_at)
       VALUES (@delivery_id, @event, @action, @installation_id, @repository, @ref, @after_sha, @workspace_id, @payload, @status, @summary, @received_at, @processed_at)
       ON CONFLICT (delivery_id) DO NOTHING`,
    ),
    insertTenant: db.prepare('INSERT OR IGNORE INTO webhook_delivery_tenants (delivery_id, tenant_id) VALUES (?, ?)'),
    insertInstallationTenants: db.prepare(
      `INSERT OR IGNORE INTO webhook_delivery_tenants (delivery_id, tenant_id)
       SELECT ?, tenant_id FROM github_integrations WHERE installation_id = ?`,
    ),
    tenantsOfInstallation: db.prepare(HOT_QUERIES.tenantsOfInstallation),
    listPending: db.prepare(HOT_QUERIES.pendingDeliveries),
    claimPending: db.prepare(HOT_QUERIES.claimPendingDeliveries),
    oldestPending: db.prepare(HOT_QUERIES.oldestPendingDelivery),
    insertResult: db.prepare(
      `INSERT INTO webhook_delivery_results (delivery_id, tenant_id, deployment_id, deployment_name, integration_id, result, revision_id, reason)
       VALUES (@delivery_id, @tenant_id, @deployment_id, @deployment_name, @integration_id, @result, @revision_id, @reason)`,
    ),
    deleteResults: db.prepare(HOT_QUERIES.deleteDeliveryResults),
    completeDelivery: db.prepare(HOT_QUERIES.completeDelivery),
    failedAttempt: db.prepare(
      `UPDATE webhook_deliveries SET attempts = attempts + 1,
         status = CASE WHEN @give_up = 1 THEN 'failed' ELSE status END,
         summary = CASE WHEN @give_up = 1 THEN @summary ELSE summary END,
         processed_at = CASE WHEN @give_up = 1 THEN @now ELSE processed_at END
       WHERE delivery_id = @delivery_id`,
    ),
    listForTenant: db.prepare(
      `SELECT d.* FROM webhook_delivery_tenants t JOIN webhook_deliveries d ON d.delivery_id = t.delivery_id
       WHERE t.tenant_id = @tenant_id AND (@event IS NULL OR d.event = @event) AND (@keys IS NULL OR d.delivery_id IN (SELECT value FROM json_each(@keys)))
       ORDER BY d.seq DESC LIMIT @limit OFFSET @offset`,
    ),
    resultsOf: db.prepare('SELECT * FROM webhook_delivery_results WHERE delivery_id = ? AND tenant_id = ? ORDER BY seq'),
    reconcileHead: db.prepare(HOT_QUERIES.reconcileHead),
    setReconcileHead: db.prepare(SET_RECONCILE_HEAD),
  };
}

/** The SQLite implementation, on the control plane's database handle. */
export class SqliteWebhookStore implements WebhookStore {
  readonly #db: Database.Database;
  readonly #stmt: ReturnType<typeof prepareStatements>;

  constructor(db: Database.Database) {
    this.#db = db;
    this.#stmt = prepareStatements(db);
  }

  async insertDelivery(d: NewDelivery): Promise<boolean> {
    const stmt = this.#stmt;
    return this.#db.transaction((): boolean => {
      const inserted = stmt.insertDelivery.run({
          ...d,
          payload: d.done ? null : d.payload,
          status: d.done ? 'processed' : 'pending',
          summary: d.done ? JSON.stringify({ outcome: d.done.outcome, reason: d.done.reason }) : null,
          processed_at: d.done ? d.received_at : null,
        });
      if (inserted.changes === 0) return false;
      if (d.workspace_id !== null) {
        stmt.insertTenant.run(d.delivery_id, d.workspace_id);
      } else if (d.installation_id !== null) {
        stmt.insertInstallationTenants.run(d.delivery_id, d.installation_id);
      }
      return true;
    })();
  }

  async tenantsOfInstallation(installationId: number): Promise<string[]> {
    const rows = this.#stmt.tenantsOfInstallation.all(installationId) as Array<{ tenant_id: string }>;
    return rows.map((r) => r.tenant_id);
  }

  async listPending(dueBy: string, limit: number): Promise<PendingDelivery[]> {
    return this.#stmt.listPending.all(dueBy, limit) as PendingDelivery[];
  }

  async claimPending(dueBy: string, limit: number, lease: WorkLease): Promise<PendingDelivery[]> {
    const rows = this.#stmt.claimPending.all({ owner: lease.owner, until: lease.until, now: lease.now, due_by: dueBy, limit }) as Array<PendingDelivery & { seq: number }>;
    return inOrder(rows);
  }

  async oldestPendingReceivedAt(): Promise<string | null> {
    const row = this.#stmt.oldestPending.get() as { at: string | null };
    return row.at;
  }

  async completeDelivery(deliveryId: string, done: { outcome: StoredOutcome; reason: string | null; results: DeliveryResultLine[]; now: string }): Promise<void> {
    const stmt = this.#stmt;
    this.#db.transaction(() => {
      // A delivery processed again after a crash replaces what the interrupted attempt wrote.
      stmt.deleteResults.run(deliveryId);
      for (const line of done.results) {
        stmt.insertResult.run({ delivery_id: deliveryId, ...line });
        stmt.insertTenant.run(deliveryId, line.tenant_id);
      }
      stmt.completeDelivery.run(JSON.stringify({ outcome: done.outcome, reason: done.reason }), done.now, deliveryId);
    })();
  }

  async recordFailedAttempt(deliveryId: string, reason: string, giveUp: boolean, now: string): Promise<void> {
    this.#stmt.failedAttempt.run({ delivery_id: deliveryId, give_up: giveUp ? 1 : 0, summary: JSON.stringify({ outcome: 'failed', reason }), now });
  }

  async listForTenant(tenantId: string, query: Omit<WebhookDeliveryListQuery, 'delivery_id'> & { deliveryKeys?: string[] }): Promise<{ resources: StoredDelivery[]; offset: number }> {
    const rows = this.#stmt.listForTenant.all({ tenant_id: tenantId, event: query.event ?? null, keys: query.deliveryKeys ? JSON.stringify(query.deliveryKeys) : null, limit: query.limit, offset: query.offset }) as Row[];
    const resultsOf = this.#stmt.resultsOf;
    const resources = rows.map((row) => toStoredDelivery(row, resultsOf.all(row.delivery_id, tenantId) as Row[]));
    return { resources, offset: query.offset + rows.length };
  }

  async pruneDeliveries(before: string): Promise<number> {
    const db = this.#db;
    return db.transaction((): number => {
      const old = "SELECT delivery_id FROM webhook_deliveries WHERE received_at < ? AND status <> 'pending'";
      db.prepare(`DELETE FROM webhook_delivery_results WHERE delivery_id IN (${old})`).run(before);
      db.prepare(`DELETE FROM webhook_delivery_tenants WHERE delivery_id IN (${old})`).run(before);
      return db.prepare("DELETE FROM webhook_deliveries WHERE received_at < ? AND status <> 'pending'").run(before).changes;
    })();
  }

  async getReconcileHead(deploymentId: string): Promise<{ repo_ref: string; sha: string; seen_at: string } | null> {
    const row = this.#stmt.reconcileHead.get(deploymentId) as
      | { repo_ref: string; sha: string; seen_at: string }
      | undefined;
    return row ?? null;
  }

  async setReconcileHead(deploymentId: string, repoRef: string, sha: string, now: string): Promise<void> {
    this.#stmt.setReconcileHead.run(deploymentId, repoRef, sha, now);
  }
}

/** Claimed rows in the order they were received (RETURNING promises no order), without their `seq`. */
export function inOrder(rows: Array<PendingDelivery & { seq: number }>): PendingDelivery[] {
  return rows.sort((a, b) => a.seq - b.seq).map(({ seq: _seq, ...delivery }) => delivery);
}
