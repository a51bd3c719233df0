import type { SchemaDialect } from '../db.ts';

/** Whether the revision's deployment belongs to a proven installation (only those report to GitHub). */
const PROVEN = 'EXISTS (SELECT 1 FROM deployments d JOIN github_installation_accounts a ON a.integration_id = d.integration_id WHERE d.id = NEW.deployment_id)';

/**
 * The GitHub round trip (contract §12).
 *
 * - `github_setup_states`: the single-use `state` of each install URL, deleted when used.
 * - `github_installation_accounts`: the GitHub account an integration's installation was proven
 *   to belong to (the setup-URL flow). Only these integrations get installation tokens and status.
 * - `github_outbox`: one row per revision status change (and deployment deletion) of a deployment
 *   whose integration is proven, written by triggers in the very transaction of the change, so no
 *   store path can change a revision and forget to tell GitHub. The sender turns them into GitHub
 *   calls, in order per revision.
 * - `github_sent`: the (revision, call, state) already accepted by GitHub: the same state is never
 *   posted twice, whatever crashed in between.
 * - `github_deployments`: the GitHub deployment made for each revision, with what marking it
 *   `inactive` later needs once the revision (or the deployment) is gone.
 * - `github_previews`: the pull-request previews, by parent and pull request (idle TTL, cap).
 */
export default (d: SchemaDialect) => `
CREATE TABLE github_setup_states (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  name TEXT,
  expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE github_installation_accounts (
  integration_id TEXT PRIMARY KEY,
  installation_id ${d.bigint} NOT NULL,
  account_login TEXT NOT NULL,
  account_id ${d.bigint} NOT NULL,
  account_type TEXT NOT NULL,
  verified_at TEXT NOT NULL
);

CREATE TABLE github_outbox (
  id ${d.serialKey},
  revision_id TEXT NOT NULL,
  deployment_id TEXT NOT NULL,
  event TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at TEXT,
  done_at TEXT,
  outcome TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX github_outbox_pending ON github_outbox (revision_id, id) WHERE done_at IS NULL;

CREATE TABLE github_sent (
  revision_id TEXT NOT NULL,
  call TEXT NOT NULL,
  state TEXT NOT NULL,
  sent_at TEXT NOT NULL,
  PRIMARY KEY (revision_id, call, state)
);

CREATE TABLE github_deployments (
  revision_id TEXT PRIMARY KEY,
  deployment_id TEXT NOT NULL,
  github_deployment_id ${d.bigint} NOT NULL,
  installation_id ${d.bigint} NOT NULL,
  owner TEXT NOT NULL,
  repo TEXT NOT NULL,
  sha TEXT NOT NULL,
  environment TEXT NOT NULL,
  environment_url TEXT,
  log_url TEXT,
  last_state TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX github_deployments_by_deployment ON github_deployments (deployment_id);

${d.afterRowTrigger(
  'github_outbox_revision_created',
  'INSERT',
  'revisions',
  PROVEN,
  `INSERT INTO github_outbox (revision_id, deployment_id, event, created_at) VALUES (NEW.id, NEW.deployment_id, NEW.status, ${d.nowText})`,
)}

${d.afterRowTrigger(
  'github_outbox_revision_moved',
  'UPDATE OF status',
  'revisions',
  `NEW.status <> OLD.status AND ${PROVEN}`,
  `INSERT INTO github_outbox (revision_id, deployment_id, event, created_at) VALUES (NEW.id, NEW.deployment_id, NEW.status, ${d.nowText})`,
)}

${d.afterRowTrigger(
  'github_outbox_deployment_deleting',
  'UPDATE OF status',
  'deployments',
  "NEW.status = 'AWAITING_DELETE' AND OLD.status <> 'AWAITING_DELETE' AND EXISTS (SELECT 1 FROM github_deployments g WHERE g.deployment_id = NEW.id)",
  `INSERT INTO github_outbox (revision_id, deployment_id, event, created_at) SELECT g.revision_id, NEW.id, 'DELETED', ${d.nowText} FROM github_deployments g WHERE g.deployment_id = NEW.id`,
)}

-- Pull-request previews: which child deployment previews which pull request of which parent.
CREATE TABLE github_previews (
  deployment_id TEXT PRIMARY KEY,
  parent_deployment_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  pull_request INTEGER NOT NULL,
  last_activity_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (parent_deployment_id, pull_request)
);
`;
