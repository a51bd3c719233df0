import type { Dialect } from '../db.ts';
import { sqliteDialect } from '../dialect.ts';
import { RUNNING, UNFINISHED } from './statuses.ts';

/**
 * The lease sweeps and renewals every process runs every few seconds. PostgreSQL locks the rows a
 * sweep takes (the dialect's `forUpdate…` and `updatePicked`), so two processes sweeping at once
 * take disjoint work. They may walk the partial indexes of the work itself (revisions in progress,
 * deployments being deleted) and the process leases (a row per process), never a table that grows
 * with history: `test/unit/query-plans.test.ts`.
 */
export function leaseQueries(d: Dialect) {
  return {
    /** A process's own lease, renewed only while still live (a lapsed one must re-check what it holds). */
    renewProcessLease: 'UPDATE process_leases SET lease_expires_at = @until WHERE process_id = @owner AND lease_expires_at >= @now',
    restartProcessLease: `INSERT INTO process_leases (process_id, lease_expires_at) VALUES (@owner, @until)
    ON CONFLICT (process_id) DO UPDATE SET lease_expires_at = excluded.lease_expires_at`,
    endProcessLease: 'UPDATE process_leases SET lease_expires_at = @now WHERE process_id = @owner',
    /**
     * Other processes whose lease has passed: a row per process, alive or dead with work left. A
     * lease locked here is this sweep's alone; the process itself, renewing meanwhile, waits, then
     * finds it expired (or gone) and re-checks what it holds.
     */
    deadProcesses: `SELECT process_id FROM process_leases WHERE lease_expires_at < @now AND process_id <> @owner ORDER BY process_id${d.forUpdateSkipLocked}`,
    /** A dead process's revisions in progress, through `revisions_running`. No ORDER BY: it would read them all. */
    takeOverFromProcess: d.updatePicked({
      table: 'revisions',
      key: 'seq',
      set: 'runner_id = @owner',
      where: `runner_id = @dead AND ${RUNNING}`,
      limit: '@limit',
      returning: 'id, deployment_id',
    }),
    /** Once it holds nothing: a process that comes back finds no lease and re-checks what it holds. */
    forgetProcess: 'DELETE FROM process_leases WHERE process_id = @dead',
    /** Started revisions no process ever held (its process died before its first renewal), unchanged for a lease. */
    takeOverUnheld: d.updatePicked({
      table: 'revisions',
      key: 'seq',
      set: 'runner_id = @owner',
      where: `runner_id IS NULL AND ${RUNNING} AND updated_at < @stale_before`,
      limit: '@limit',
      skipLocked: true,
      returning: 'id, deployment_id',
    }),
    /**
     * Only while the process has a lease: a revision never names a process with no row. The lease
     * row is share-locked, so a sweep deleting it (it found it expired) is waited for, and then
     * nothing is held.
     */
    holdRevisions: `UPDATE revisions SET runner_id = @owner
    WHERE ${d.inList('id', '@ids')} AND ${UNFINISHED} AND (runner_id = @owner OR runner_id IS NULL)
      AND EXISTS (SELECT 1 FROM process_leases WHERE process_id = @owner${d.forShare})
    RETURNING id`,
    releaseRevisions: `UPDATE revisions SET runner_id = NULL WHERE ${d.inList('id', '@ids')} AND runner_id = @owner`,
    /**
     * Deployments with a queued revision and none started (their start was lost with a process): a
     * skip scan of `revisions_queued`, one seek from each deployment with a queued revision to the
     * next, then one for its revision in progress. Not a walk of every queued revision: a backlog
     * of tens of thousands of queued PATCHes made that sweep, every half lease, a pause of ~10 ms.
     */
    stalledQueuedDeployments: `WITH RECURSIVE queued_deployments (deployment_id) AS (
      SELECT (SELECT min(deployment_id) FROM revisions WHERE status = 'QUEUED')
      UNION ALL
      SELECT (SELECT min(r.deployment_id) FROM revisions r WHERE r.status = 'QUEUED' AND r.deployment_id > queued_deployments.deployment_id)
        FROM queued_deployments WHERE queued_deployments.deployment_id IS NOT NULL)
    SELECT deployment_id FROM queued_deployments WHERE deployment_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM revisions p WHERE p.deployment_id = queued_deployments.deployment_id AND p.${UNFINISHED} AND p.status <> 'QUEUED')`,
    takeOverTeardowns: d.updatePicked({
      table: 'deployments',
      key: 'id',
      set: 'teardown_owner = @owner, teardown_lease_expires_at = @until',
      where: "status = 'AWAITING_DELETE' AND (teardown_owner IS NULL OR teardown_lease_expires_at < @now)",
      limit: '@limit',
      skipLocked: true,
      returning: '*',
    }),
    renewTeardownLeases: `UPDATE deployments SET teardown_lease_expires_at = @until
    WHERE ${d.inList('id', '@ids')} AND status = 'AWAITING_DELETE' AND teardown_owner = @owner
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
    SELECT d.id, d.active_revision_id FROM workspaces w ${d.joinInOrder} deployments d ON d.tenant_id = w.id
    WHERE w.default_listener_id = @listener AND d.listener_id IS NULL AND d.status = @status`,
  } as const;
}

/** SQLite's text of each (what `test/unit/query-plans.test.ts` reads the plans of). */
export const LEASE_QUERIES = leaseQueries(sqliteDialect);
