import { TERMINAL_REVISION_STATUSES } from '../../../shared/schemas/revision.ts';

/** Status lists as SQL literals (fixed enum values, not input). */
export const sqlList = (statuses: Iterable<string>) => [...statuses].map((status) => `'${status}'`).join(',');
export const TERMINAL = sqlList(TERMINAL_REVISION_STATUSES);
/**
 * The predicate of the partial index `revisions_unfinished`, word for word: SQLite uses a partial
 * index only when the query's WHERE contains the index's own condition, so queries for a
 * deployment's unfinished revisions repeat it instead of listing the statuses they want.
 */
export const UNFINISHED = `status NOT IN (${TERMINAL})`;
/** Started and unfinished: the predicate of the partial index `revisions_running` (by process), word for word. */
export const RUNNING = `${UNFINISHED} AND status <> 'QUEUED'`;
/**
 * Statuses after which a commit may be built again by a push. SKIPPED is not among them: a revision
 * skipped because a newer one superseded it must not come back on a redelivery and deploy an older commit.
 */
export const PUSH_RETRYABLE = ['CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED'];
