import type { SchemaDialect } from '../db.ts';

/**
 * One lease per server process for the revisions it runs: a started revision names its
 * process (`revisions.runner_id`), and the process keeps one row here alive instead of renewing a
 * lease on every revision it holds, a write per revision every few seconds that grew with the work
 * in progress. A sweep finds expired processes here and their revisions through
 * `revisions_running`, so it reads what it takes, not every revision in progress.
 * `revisions.lease_expires_at` is no longer written. Every process named by a revision in progress
 * gets its row (with the latest lease it had), so work keeps its owner through the upgrade.
 */
export default (_d: SchemaDialect) => `
CREATE TABLE process_leases (
  process_id TEXT PRIMARY KEY,
  lease_expires_at TEXT NOT NULL
);
CREATE INDEX revisions_running ON revisions (runner_id)
  WHERE status NOT IN ('DEPLOYED', 'CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'SKIPPED', 'INTERRUPTED') AND status <> 'QUEUED';
INSERT INTO process_leases (process_id, lease_expires_at)
  SELECT runner_id, MAX(COALESCE(lease_expires_at, '1970-01-01T00:00:00.000Z')) FROM revisions
  WHERE runner_id IS NOT NULL AND status NOT IN ('DEPLOYED', 'CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'SKIPPED', 'INTERRUPTED') AND status <> 'QUEUED'
  GROUP BY runner_id;
`;
