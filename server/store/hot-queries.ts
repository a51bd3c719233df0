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
/** Started and unfinished: the predicate of the partial index `revisions_running` (by process), word for word. */
const RUNNING = `${UNFINISHED} AND status <> 'QUEUED'`;
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
   * Every new revision. A started one a create stores names its process (@runner) when that
   * process's lease is live at @runner_now, in the same write (see `NewDeployment.runner`); the
   * RETURNING tells which. Without @runner the lookup finds nothing and the revision names no one.
   */
  insertRevision: `INSERT INTO revisions (id, deployment_id, tenant_id, status, status_message, source, source_revision_config, commit_sha, secrets, resource_spec, trigger, created_at, updated_at, runner_id)
    VALUES (@id, @deployment_id, @tenant_id, @status, @status_message, @source, @source_revision_config, @commit_sha, @secrets, @resource_spec, @trigger, @now, @now,
      (SELECT process_id FROM process_leases WHERE process_id = @runner AND lease_expires_at >= @runner_now))
    RETURNING runner_id`,
  /** A create's data-plane choice: the deployment's listener, else the workspace's default, in one read. */
  servingComputeType: 'SELECT compute_type FROM listeners WHERE tenant_id = ? AND id = COALESCE(?, (SELECT default_listener_id FROM workspaces WHERE id = ?))',
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
  /**
   * Claims the oldest due pending deliveries nobody holds (or whose holder's lease has passed) for
   * one process: the pending index in order up to the limit, then each row by its key. PostgreSQL
   * runs the same with `FOR UPDATE SKIP LOCKED` on the inner select (server/store/postgres/webhooks.ts).
   */
  claimPendingDeliveries: `UPDATE webhook_deliveries SET claimed_by = @owner, claim_expires_at = @until
    WHERE seq IN (SELECT seq FROM webhook_deliveries WHERE status = 'pending' AND received_at <= @due_by
      AND (claim_expires_at IS NULL OR claim_expires_at < @now) ORDER BY seq LIMIT @limit)
    RETURNING seq, delivery_id, event, workspace_id, payload, attempts, received_at`,
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

/**
 * The branch head a push (or the reconciler) showed for a deployment: (deployment_id, repo_ref, sha,
 * seen_at). An upsert by primary key, so there is no plan to assert; shared by the webhook stores and
 * the push-revision transactions that record it with the revision.
 */
export const SET_RECONCILE_HEAD = `INSERT INTO reconcile_heads (deployment_id, repo_ref, sha, seen_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (deployment_id) DO UPDATE SET repo_ref = excluded.repo_ref, sha = excluded.sha, seen_at = excluded.seen_at`;

/**
 * The lease sweeps and renewals every process runs every few seconds (SQLite's form; PostgreSQL's
 * locks the rows it takes, `server/store/postgres/core.ts`). They may walk the partial indexes of
 * the work itself (revisions in progress, deployments being deleted) and the process leases (a row
 * per process), never a table that grows with history: `test/unit/query-plans.test.ts`.
 */
export const LEASE_QUERIES = {
  /** A process's own lease, renewed only while still live (a lapsed one must re-check what it holds). */
  renewProcessLease: 'UPDATE process_leases SET lease_expires_at = @until WHERE process_id = @owner AND lease_expires_at >= @now',
  restartProcessLease: `INSERT INTO process_leases (process_id, lease_expires_at) VALUES (@owner, @until)
    ON CONFLICT (process_id) DO UPDATE SET lease_expires_at = excluded.lease_expires_at`,
  endProcessLease: 'UPDATE process_leases SET lease_expires_at = @now WHERE process_id = @owner',
  /** Other processes whose lease has passed: a row per process, alive or dead with work left. */
  deadProcesses: 'SELECT process_id FROM process_leases WHERE lease_expires_at < @now AND process_id <> @owner ORDER BY process_id',
  /** A dead process's revisions in progress, through `revisions_running`. No ORDER BY: it would read them all. */
  takeOverFromProcess: `UPDATE revisions SET runner_id = @owner
    WHERE id IN (SELECT id FROM revisions WHERE runner_id = @dead AND ${RUNNING} LIMIT @limit)
    RETURNING id, deployment_id`,
  /** Once it holds nothing: a process that comes back finds no lease and re-checks what it holds. */
  forgetProcess: 'DELETE FROM process_leases WHERE process_id = @dead',
  /** Started revisions no process ever held (its process died before its first renewal), unchanged for a lease. */
  takeOverUnheld: `UPDATE revisions SET runner_id = @owner
    WHERE id IN (SELECT id FROM revisions WHERE runner_id IS NULL AND ${RUNNING} AND updated_at < @stale_before LIMIT @limit)
    RETURNING id, deployment_id`,
  /** Only while the process has a lease: a revision never names a process with no row. */
  holdRevisions: `UPDATE revisions SET runner_id = @owner
    WHERE id IN (SELECT value FROM json_each(@ids)) AND ${UNFINISHED} AND (runner_id = @owner OR runner_id IS NULL)
      AND EXISTS (SELECT 1 FROM process_leases WHERE process_id = @owner)
    RETURNING id`,
  releaseRevisions: 'UPDATE revisions SET runner_id = NULL WHERE id IN (SELECT value FROM json_each(@ids)) AND runner_id = @owner',
  /**
   * Deployments with a queued revision and none started (their start was lost with a process): a
   * skip scan of `revisions_queued`, one seek from each deployment with a queued revision to the
   * next, then one for its revision in progress. Not a walk of every queued revision: a backlog of
   * queued PATCHes (37,000 in issue 13's benchmark) made this sweep, every half lease, a ~10 ms
   * pause. The same text on PostgreSQL.
   */
  stalledQueuedDeployments: `WITH RECURSIVE queued_deployments (deployment_id) AS (
      SELECT (SELECT min(deployment_id) FROM revisions WHERE status = 'QUEUED')
      UNION ALL
      SELECT (SELECT min(r.deployment_id) FROM revisions r WHERE r.status = 'QUEUED' AND r.deployment_id > queued_deployments.deployment_id)
        FROM queued_deployments WHERE queued_deployments.deployment_id IS NOT NULL)
    SELECT deployment_id FROM queued_deployments WHERE deployment_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM revisions p WHERE p.deployment_id = queued_deployments.deployment_id AND p.${UNFINISHED} AND p.status <> 'QUEUED')`,
  takeOverTeardowns: `UPDATE deployments SET teardown_owner = @owner, teardown_lease_expires_at = @until
    WHERE id IN (SELECT id FROM deployments WHERE status = 'AWAITING_DELETE' AND (teardown_owner IS NULL OR teardown_lease_expires_at < @now) LIMIT @limit)
    RETURNING *`,
  renewTeardownLeases: `UPDATE deployments SET teardown_lease_expires_at = @until
    WHERE id IN (SELECT value FROM json_each(@ids)) AND status = 'AWAITING_DELETE' AND teardown_owner = @owner
    RETURNING id`,
  renewUploadLeases: "UPDATE uploads SET receive_lease_expires_at = @until WHERE receiver_id = @owner AND state = 'receiving'",
  /** The silent-listener sweep: agent listeners not heard from since @cutoff (one never heard is not silent), through `listeners_agents_by_last_seen`. */
  silentAgentListeners: "SELECT id FROM listeners WHERE compute_type IN ('local', 'k8s') AND last_seen_at < @cutoff",
  /**
   * The deployments a listener serves in @status (the sweep's READY, a heartbeat's UNKNOWN): its own
   * (`deployments_by_listener`), and those naming none in the workspaces it is the default of.
   * Never `COALESCE(listener_id, default) = ?`: no index answers that expression, and it read
   * every deployment. CROSS JOIN keeps SQLite's join order: from the workspaces, then their
   * deployments; left to itself it read every deployment naming no listener (most of them).
   */
  servedInStatus: `SELECT id, active_revision_id FROM deployments WHERE listener_id = @listener AND status = @status
    UNION ALL
    SELECT d.id, d.active_revision_id FROM workspaces w CROSS JOIN deployments d ON d.tenant_id = w.id
    WHERE w.default_listener_id = @listener AND d.listener_id IS NULL AND d.status = @status`,
} as const;
