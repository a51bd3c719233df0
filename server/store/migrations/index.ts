import initial from './001_initial.ts';
import webhooks from './002_webhooks.ts';
import oauth from './003_oauth.ts';
import compat from './004_compat.ts';
import oauthWorkspaces from './005_oauth_workspaces.ts';
import webhookScoping from './006_webhook_scoping.ts';
import agents from './007_agents.ts';
import revisionCommit from './008_revision_commit.ts';
import workLeases from './009_work_leases.ts';
import processLeases from './010_process_leases.ts';
import teardownReports from './011_teardown_reports.ts';
import listenerSweepIndexes from './012_listener_sweep_indexes.ts';
import queuedRevisionsIndex from './013_queued_revisions_index.ts';
import agentPublicUrl from './014_agent_public_url.ts';

/**
 * Versioned migrations, applied in order at start inside one transaction each. Append only: a
 * released migration is never edited, a change is a new entry with the next version.
 */
export const MIGRATIONS: ReadonlyArray<{ version: number; name: string; sql: string }> = [
  { version: 1, name: 'initial', sql: initial },
  { version: 2, name: 'webhooks', sql: webhooks },
  { version: 3, name: 'oauth', sql: oauth },
  { version: 4, name: 'compat', sql: compat },
  { version: 5, name: 'oauth_workspaces', sql: oauthWorkspaces },
  { version: 6, name: 'webhook_scoping', sql: webhookScoping },
  { version: 7, name: 'agents', sql: agents },
  { version: 8, name: 'revision_commit', sql: revisionCommit },
  { version: 9, name: 'work_leases', sql: workLeases },
  { version: 10, name: 'process_leases', sql: processLeases },
  { version: 11, name: 'teardown_reports', sql: teardownReports },
  { version: 12, name: 'listener_sweep_indexes', sql: listenerSweepIndexes },
  { version: 13, name: 'queued_revisions_index', sql: queuedRevisionsIndex },
  { version: 14, name: 'agent_public_url', sql: agentPublicUrl },
];
