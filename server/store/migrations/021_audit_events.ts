import type { SchemaDialect } from '../db.ts';

/**
 * The audit log (contract section 17): one row per change made through the API, written in the
 * transaction of the change. Rows are only ever added (and removed once older than the retention);
 * `seq` is the order they were written in and the cursor of the listing. Each index is a write on
 * every change, so there are only those the reads need (the hourly retention sweep scans).
 */
export default (d: SchemaDialect) => `
CREATE TABLE audit_events (
  seq ${d.serialKey},
  id TEXT NOT NULL,
  organization_id TEXT NOT NULL,
  workspace_id TEXT,
  actor_kind TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  actor_scope TEXT,
  address TEXT,
  user_agent TEXT,
  action TEXT NOT NULL,
  resource_type TEXT NOT NULL,
  resource_id TEXT,
  route TEXT,
  fields TEXT NOT NULL,
  outcome TEXT NOT NULL,
  status INTEGER,
  request_id TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX audit_events_by_organization ON audit_events (organization_id, seq);
CREATE INDEX audit_events_by_workspace ON audit_events (workspace_id, seq);
CREATE INDEX audit_events_by_resource ON audit_events (resource_id, seq);
`;
