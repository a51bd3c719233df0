import { TERMINAL_REVISION_STATUSES } from '../../shared/schemas/revision.ts';

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
  /** The one-in-progress rule: a count over the deployment's unfinished revisions only. */
  inProgressCount: `SELECT count(*) AS n FROM revisions WHERE deployment_id = ? AND ${UNFINISHED} AND status <> 'QUEUED'`,
  queued: `SELECT * FROM revisions WHERE deployment_id = ? AND ${UNFINISHED} AND status = 'QUEUED' ORDER BY seq DESC`,
  /** A push's "is this commit built already?": the commit column's index, not the revisions' JSON. */
  revisionOfCommit: `SELECT id, status FROM revisions WHERE deployment_id = ? AND commit_sha = ? AND status NOT IN (${sqlList(PUSH_RETRYABLE)}) ORDER BY seq DESC LIMIT 1`,
  deploymentsByRepo: "SELECT * FROM deployments WHERE repo_url_key = ? AND source = 'github' ORDER BY created_at, rowid",
  readLogs: 'SELECT seq, timestamp, level, message FROM revision_logs WHERE revision_id = ? AND type = ? AND seq > ? ORDER BY seq LIMIT ?',
} as const;
