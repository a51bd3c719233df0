import initial from './001_initial.ts';
import workLeases from './002_work_leases.ts';
import processLeases from './003_process_leases.ts';
import teardownReports from './004_teardown_reports.ts';
import listenerSweepIndexes from './005_listener_sweep_indexes.ts';
import queuedRevisionsIndex from './006_queued_revisions_index.ts';
import agentPublicUrl from './007_agent_public_url.ts';

/**
 * PostgreSQL's own versioned migrations, applied in order at start, each in one transaction, under
 * an advisory lock. Append only, like the SQLite ones; the numbering is independent of theirs.
 */
export const PG_MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  { version: 1, name: 'initial', sql: initial },
  { version: 2, name: 'work_leases', sql: workLeases },
  { version: 3, name: 'process_leases', sql: processLeases },
  { version: 4, name: 'teardown_reports', sql: teardownReports },
  { version: 5, name: 'listener_sweep_indexes', sql: listenerSweepIndexes },
  { version: 6, name: 'queued_revisions_index', sql: queuedRevisionsIndex },
  { version: 7, name: 'agent_public_url', sql: agentPublicUrl },
];
