import type { SchemaDialect } from '../db.ts';
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
import indexesOneHistoryHad from './014_indexes_one_history_had.ts';
import githubOidc from './015_github_oidc.ts';
import uploadReservationsLogCaps from './016_upload_reservations_log_caps.ts';
import githubRoundTrip from './017_github_round_trip.ts';
import agentPublicUrl from './018_agent_public_url.ts';
import githubEveryWayIn from './019_github_every_way_in.ts';
import consoleSessions from './020_console_sessions.ts';
import auditEvents from './021_audit_events.ts';
import eventSubscriptions from './022_event_subscriptions.ts';
import githubCheckRuns from './023_github_check_runs.ts';
import revisionTraceContext from './024_revision_trace_context.ts';
import partialDeploymentIndexes from './025_partial_deployment_indexes.ts';

export type Migration = { version: number; name: string; sql: (dialect: SchemaDialect) => string };

/**
 * The one schema history both databases run, in order, each migration in one transaction, written
 * once with the dialect's substitutions where the two spell a declaration differently
 * (`Dialect.schema`). Append only: a released migration is never edited; a change is a new entry
 * with the next version. PostgreSQL databases made by the separate history PostgreSQL had until
 * this one are adopted into it at start (`../migrate.ts`).
 */
export const MIGRATIONS: readonly Migration[] = [
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
  { version: 14, name: 'indexes_one_history_had', sql: indexesOneHistoryHad },
  { version: 15, name: 'github_oidc', sql: githubOidc },
  { version: 16, name: 'upload_reservations_log_caps', sql: uploadReservationsLogCaps },
  { version: 17, name: 'github_round_trip', sql: githubRoundTrip },
  { version: 18, name: 'agent_public_url', sql: agentPublicUrl },
  { version: 19, name: 'github_every_way_in', sql: githubEveryWayIn },
  { version: 20, name: 'console_sessions', sql: consoleSessions },
  { version: 21, name: 'audit_events', sql: auditEvents },
  { version: 22, name: 'event_subscriptions', sql: eventSubscriptions },
  { version: 23, name: 'github_check_runs', sql: githubCheckRuns },
  { version: 24, name: 'revision_trace_context', sql: revisionTraceContext },
  { version: 25, name: 'partial_deployment_indexes', sql: partialDeploymentIndexes },
];

/**
 * PostgreSQL's former history, version by version, as the version of this history whose schema it
 * had made: its first version made what versions 1–8 make here, and each later one one version here.
 */
export const FORMER_POSTGRES_VERSIONS: ReadonlyMap<number, number> = new Map([
  [1, 8],
  [2, 9],
  [3, 10],
  [4, 11],
  [5, 12],
  [6, 13],
]);
