import { IN_PROGRESS_REVISION_STATUSES } from '../../../shared/schemas/revision.ts';
import type { Dialect } from '../db.ts';
import { sqliteDialect } from '../dialect.ts';
import { PUSH_RETRYABLE, sqlList, UNFINISHED } from './statuses.ts';

/** The columns of a revision's record (`toRevision`), in the order of its public answer. */
export const REVISION_RECORD_COLUMNS =
  'id, deployment_id, created_at, updated_at, status, status_message, source, source_revision_config, trigger, tenant_id, version';

/**
 * The statements on request and pipeline hot paths. Each must be an index seek whatever the
 * history (a deployment's past revisions, past deliveries): `test/unit/query-plans.test.ts`
 * asserts the plan of every one, so a change that turns one into a scan fails there.
 */
export function hotQueries(d: Dialect) {
  return {
    apiKeyByHash: 'SELECT * FROM api_keys WHERE key_hash = ?',
    defaultWorkspace: 'SELECT * FROM workspaces WHERE organization_id = ? AND is_default = 1',
    deployment: 'SELECT * FROM deployments WHERE id = ? AND tenant_id = ?',
    deploymentById: 'SELECT * FROM deployments WHERE id = ?',
    /**
     * What a revision's record holds (`toRevision`), in its answer's order: not `*`, whose secrets,
     * resource spec and trace context every GET of a revision read and threw away.
     */
    revision: `SELECT ${REVISION_RECORD_COLUMNS} FROM revisions WHERE id = ? AND deployment_id = ? AND tenant_id = ?`,
    revisionById: 'SELECT * FROM revisions WHERE id = ?',
    /**
     * Every new revision. A started one a create stores names its process (the last two values: the
     * process, the time) when that process's lease is live then, in the same write (see
     * `NewDeployment.runner`); the RETURNING tells which. Without a process the lookup finds nothing
     * and the revision names no one. Positional: see INSERT_DEPLOYMENT in deployments.ts.
     */
    insertRevision: `INSERT INTO revisions (id, deployment_id, tenant_id, status, status_message, source, source_revision_config, commit_sha, secrets, resource_spec, trigger, traceparent, created_at, updated_at, runner_id)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
      (SELECT process_id FROM process_leases WHERE process_id = ? AND lease_expires_at >= ?${d.forKeyShare}))
    RETURNING runner_id`,
    /** A create's data-plane choice: the deployment's listener, else the workspace's default, in one read. */
    servingComputeType:
      'SELECT compute_type FROM listeners WHERE tenant_id = ? AND id = COALESCE(?, (SELECT default_listener_id FROM workspaces WHERE id = ?))',
    /**
     * The one-in-progress rule: a seek per in-progress status in the deployment's unfinished
     * revisions. Not `status <> 'QUEUED'`, which seeks the deployment alone and then reads every
     * queued revision: a backlog of pushes made each new one slower to queue.
     */
    inProgressCount: `SELECT count(*) AS n FROM revisions WHERE deployment_id = ? AND ${UNFINISHED} AND status IN (${sqlList(IN_PROGRESS_REVISION_STATUSES)})`,
    queued: `SELECT * FROM revisions WHERE deployment_id = ? AND ${UNFINISHED} AND status = 'QUEUED' ORDER BY seq DESC`,
    /** A push's "is this commit built already?": the commit column's index, not the revisions' JSON. */
    revisionOfCommit: `SELECT id, status FROM revisions WHERE deployment_id = ? AND commit_sha = ? AND status NOT IN (${sqlList(PUSH_RETRYABLE)}) ORDER BY seq DESC LIMIT 1`,
    deploymentsByRepo: "SELECT * FROM deployments WHERE repo_url_key = ? AND source = 'github' ORDER BY created_at, rowid",
    readLogs: 'SELECT seq, timestamp, level, message FROM revision_logs WHERE revision_id = ? AND type = ? AND seq > ? ORDER BY seq LIMIT ?',
    // The webhook delivery worker's and processor's: each delivery runs them, whatever the number
    // of deliveries already processed (kept for the log) or of the deployment's past revisions.
    tenantsOfInstallation: 'SELECT DISTINCT tenant_id FROM github_integrations WHERE installation_id = ?',
    integrationById: 'SELECT * FROM github_integrations WHERE id = ?',
    /**
     * A github create's integration and its data-plane choice in one read, where
     * `servingComputeType` after it was a second: a github deployment names no listener, so the
     * workspace's default serves it (its compute type, or null for none: the sandbox).
     */
    integrationForCreate: `SELECT i.*, (SELECT l.compute_type FROM listeners l
        WHERE l.tenant_id = i.tenant_id AND l.id = (SELECT w.default_listener_id FROM workspaces w WHERE w.id = i.tenant_id)) AS serving_compute_type
      FROM github_integrations i WHERE i.id = ? AND i.tenant_id = ?`,
    /** Walks the partial index of pending deliveries only (the work), in order, up to the limit. */
    pendingDeliveries: `SELECT delivery_id, event, workspace_id, payload, attempts, received_at FROM webhook_deliveries
    WHERE status = 'pending' AND received_at <= ? ORDER BY seq LIMIT ?`,
    /**
     * Claims the oldest due pending deliveries nobody holds (or whose holder's lease has passed) for
     * one process: the pending index in order up to the limit, then each row by its key. PostgreSQL
     * locks them, skipping those another process is claiming, so processes take disjoint deliveries.
     */
    claimPendingDeliveries: d.updatePicked({
      table: 'webhook_deliveries',
      key: 'seq',
      set: 'claimed_by = @owner, claim_expires_at = @until',
      where: "status = 'pending' AND received_at <= @due_by AND (claim_expires_at IS NULL OR claim_expires_at < @now)",
      order: 'seq',
      limit: '@limit',
      skipLocked: true,
      returning: 'seq, delivery_id, event, workspace_id, payload, attempts, received_at',
    }),
    oldestPendingDelivery: "SELECT min(received_at) AS at FROM webhook_deliveries WHERE status = 'pending'",
    deleteDeliveryResults: 'DELETE FROM webhook_delivery_results WHERE delivery_id = ?',
    completeDelivery: `UPDATE webhook_deliveries SET status = 'processed', summary = ?, processed_at = ?, payload = NULL, attempts = attempts + 1
    WHERE delivery_id = ?`,
    reconcileHead: 'SELECT repo_ref, sha, seen_at FROM reconcile_heads WHERE deployment_id = ?',
    /** A stage change: a compare-and-set on the revision's status, by its primary key. */
    transition: `UPDATE revisions SET status = @to, status_message = @status_message, version = version + 1, updated_at = @now
    WHERE id = @id AND ${d.inList('status', '@from')}`,
    markDeployed: `UPDATE deployments SET active_revision_id = @revision_id, updated_at = @now,
      status = CASE WHEN status = 'AWAITING_DELETE' THEN status ELSE 'READY' END
    WHERE id = @deployment_id`,
    /** A push revision becomes the deployment's latest. */
    deploymentOnPush: 'UPDATE deployments SET source_revision_config = ?, latest_revision_id = ?, updated_at = ? WHERE id = ?',
  } as const;
}

/** The hot statements in one database's spelling. */
export type HotQueries = ReturnType<typeof hotQueries>;

/** SQLite's text of each (what `test/unit/query-plans.test.ts` reads the plans of). */
export const HOT_QUERIES = hotQueries(sqliteDialect);

/**
 * The branch head a push (or the reconciler) showed for a deployment: (deployment_id, repo_ref, sha,
 * seen_at). An upsert by primary key, so there is no plan to assert; shared by the webhook store and
 * the push-revision transaction that record it with the revision.
 */
export const SET_RECONCILE_HEAD = `INSERT INTO reconcile_heads (deployment_id, repo_ref, sha, seen_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (deployment_id) DO UPDATE SET repo_ref = excluded.repo_ref, sha = excluded.sha, seen_at = excluded.seen_at`;
