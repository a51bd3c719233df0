import type { SchemaDialect } from '../db.ts';

/**
 * Listener agents: agent tokens (hashed), claims with leases on work (revisions to build
 * or deploy, deployments to tear down), when a listener's agent was last heard from, and which
 * listener serves a workspace's deployments that name none.
 */
export default (d: SchemaDialect) => `
CREATE TABLE listener_tokens (
  id TEXT PRIMARY KEY,
  listener_id TEXT NOT NULL REFERENCES listeners(id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE INDEX listener_tokens_by_listener ON listener_tokens (listener_id);

-- One row per piece of work an agent holds: 'revision:<id>' or 'teardown:<deployment id>'. A row
-- whose lease has expired is free to be claimed again (the row is then replaced, new claim_id).
CREATE TABLE agent_claims (
  work_key TEXT PRIMARY KEY,
  claim_id TEXT NOT NULL UNIQUE,
  listener_id TEXT NOT NULL REFERENCES listeners(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  revision_id TEXT,
  deployment_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  lease_expires_at TEXT NOT NULL,
  claimed_at TEXT NOT NULL
);
CREATE INDEX agent_claims_by_listener ON agent_claims (listener_id);

ALTER TABLE listeners ADD COLUMN last_seen_at TEXT;
ALTER TABLE listeners ADD COLUMN agent_version TEXT;
ALTER TABLE listeners ADD COLUMN agent_capacity INTEGER;

-- Contract §5: the workspace's default listener, its bootstrap sandbox listener until changed.
-- NULL (no sandbox listener, or the default was deleted) also means the built-in sandbox.
ALTER TABLE workspaces ADD COLUMN default_listener_id TEXT REFERENCES listeners(id) ON DELETE SET NULL;
UPDATE workspaces SET default_listener_id = (
  SELECT l.id FROM listeners l WHERE l.tenant_id = workspaces.id AND l.compute_type = 'sandbox' ORDER BY l.created_at, l.rowid LIMIT 1
);
-- A workspace's first sandbox listener (created with the workspace) becomes its default.
${d.afterInsertTrigger(
  'listeners_sandbox_default',
  'listeners',
  "NEW.compute_type = 'sandbox'",
  'UPDATE workspaces SET default_listener_id = NEW.id WHERE id = NEW.tenant_id AND default_listener_id IS NULL',
)}
`;
