import { IN_PROGRESS_REVISION_STATUSES, TERMINAL_REVISION_STATUSES } from '../../shared/schemas/revision.ts';

/** Status lists as SQL literals (fixed enum values, not input). */
export const sqlList = (statuses: Iterable<string>) => [...statuses].map((status) => `'${status}'`).join(',');
export const TERMINAL = sqlList(TERMINAL_REVISION_STATUSES);
/**
 * The predicate of the partial index `revisions_unfinished`, word for word: SQLite uses a partial
 * index only when the query's WHERE contains the index's own condition, so queries for a
 * deployment's unfinished revisions repeat it instead of listing the statuses they want.
 */
const UNFINISHED = `status NOT IN (${TERMINAL})`;
/**
 * Statuses after which a commit may be built again by a push. SKIPPED is not among them: a revision
 * skipped because a newer one superseded it must not come back on a redelivery and deploy an older commit.
 */
export const PUSH_RETRYABLE = ['CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED'];

/**
 * The statements on request and pipeline hot paths. Each must be an index seek whatever the
 * history (a deployment's past revisions, past deliveries): `test/unit/query-plans.test.ts`
 * asserts the plan of every one, so a change that turns one into a scan fails there.
 */
export const HOT_QUERIES = {
  apiKeyByHash: 'SELECT * FROM api_keys WHERE key_hash = ?',
  defaultWorkspace: 'SELECT * FROM workspaces WHERE organization_id = ? AND is_default = 1',
  deployment: 'SELECT * FROM deployments WHERE id = ? AND tenant_id = ?',
  deploymentById: 'SELECT * FROM deployments WHERE id = ?',
  revision: 'SELECT * FROM revisions WHERE id = ? AND deployment_id = ? AND tenant_id = ?',
  revisionById: 'SELECT * FROM revisions WHERE id = ?',
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
  /** Walks the partial index of pending deliveries only (the work), in order, up to the limit. */
  pendingDeliveries: `SELECT delivery_id, event, workspace_id, payload, attempts, received_at FROM webhook_deliveries
    WHERE status = 'pending' AND received_at <= ? ORDER BY seq LIMIT ?`,
  oldestPendingDelivery: "SELECT min(received_at) AS at FROM webhook_deliveries WHERE status = 'pending'",
  deleteDeliveryResults: 'DELETE FROM webhook_delivery_results WHERE delivery_id = ?',
  completeDelivery: `UPDATE webhook_deliveries SET status = 'processed', summary = ?, processed_at = ?, payload = NULL, attempts = attempts + 1
    WHERE delivery_id = ?`,
  reconcileHead: 'SELECT repo_ref, sha, seen_at FROM reconcile_heads WHERE deployment_id = ?',
  /** A stage change: a compare-and-set on the revision's status, by its primary key. */
  transition: `UPDATE revisions SET status = @to, status_message = @status_message, version = version + 1, updated_at = @now
    WHERE id = @id AND status IN (SELECT value FROM json_each(@from))`,
  markDeployed: `UPDATE deployments SET active_revision_id = @revision_id, updated_at = @now,
      status = CASE WHEN status = 'AWAITING_DELETE' THEN status ELSE 'READY' END
    WHERE id = @deployment_id`,
  /** A push revision becomes the deployment's latest. */
  deploymentOnPush: 'UPDATE deployments SET source_revision_config = ?, latest_revision_id = ?, updated_at = ? WHERE id = ?',
} as const;
