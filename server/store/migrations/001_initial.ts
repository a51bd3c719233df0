import type { SchemaDialect } from '../db.ts';

/** The control-plane tables: tenancy, keys, deployments, revisions and their logs. */
export default (d: SchemaDialect) => `
CREATE TABLE organizations (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL
);

CREATE TABLE workspaces (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  name TEXT NOT NULL,
  is_default INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  UNIQUE (organization_id, name)
);

CREATE TABLE api_keys (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  workspace_id TEXT REFERENCES workspaces(id),
  key_hash TEXT NOT NULL UNIQUE,
  description TEXT,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);

CREATE TABLE listeners (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  compute_type TEXT NOT NULL,
  compute_id TEXT NOT NULL,
  compute_config TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (tenant_id, compute_id)
);

CREATE TABLE github_integrations (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  installation_id ${d.bigint} NOT NULL,
  name TEXT NOT NULL,
  suspended_at TEXT,
  created_at TEXT NOT NULL,
  UNIQUE (tenant_id, installation_id)
);
CREATE INDEX github_integrations_by_installation ON github_integrations (installation_id);

CREATE TABLE deployments (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  name TEXT NOT NULL,
  source TEXT NOT NULL,
  source_config TEXT NOT NULL,
  -- the latest revision's config and secrets, kept here so a GET reads one row
  source_revision_config TEXT NOT NULL,
  secrets TEXT NOT NULL,
  status TEXT NOT NULL,
  latest_revision_id TEXT,
  active_revision_id TEXT,
  image_version TEXT,
  -- columns the list filters and the webhook matcher query by
  deployment_type TEXT,
  integration_id TEXT,
  listener_id TEXT,
  repo_url_key TEXT,
  repo_ref TEXT,
  build_on_push INTEGER NOT NULL DEFAULT 0,
  delete_tracing_project INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (tenant_id, name)
);
CREATE INDEX deployments_by_tenant ON deployments (tenant_id, created_at DESC);
CREATE INDEX deployments_by_listener ON deployments (listener_id);
CREATE INDEX deployments_push_targets ON deployments (repo_url_key, repo_ref) WHERE build_on_push = 1;
CREATE INDEX deployments_deleting ON deployments (status) WHERE status = 'AWAITING_DELETE';

CREATE TABLE revisions (
  seq ${d.serialKey},
  id TEXT NOT NULL UNIQUE,
  deployment_id TEXT NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  status TEXT NOT NULL,
  status_message TEXT,
  source TEXT NOT NULL,
  source_revision_config TEXT NOT NULL,
  secrets TEXT NOT NULL,
  resource_spec TEXT,
  trigger TEXT NOT NULL,
  version INTEGER NOT NULL DEFAULT 1,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX revisions_by_deployment ON revisions (deployment_id, seq DESC);
CREATE INDEX revisions_unfinished ON revisions (deployment_id, status)
  WHERE status NOT IN ('DEPLOYED', 'CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'SKIPPED', 'INTERRUPTED');

CREATE TABLE revision_logs (
  seq ${d.serialKey},
  revision_id TEXT NOT NULL REFERENCES revisions(id) ON DELETE CASCADE,
  type TEXT NOT NULL,
  level TEXT NOT NULL,
  message TEXT NOT NULL,
  timestamp TEXT NOT NULL
);
CREATE INDEX revision_logs_by_revision ON revision_logs (revision_id, type, seq);

CREATE TABLE tracing_projects (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  name TEXT NOT NULL,
  deployment_id TEXT,
  created_at TEXT NOT NULL,
  UNIQUE (tenant_id, name)
);
CREATE INDEX tracing_projects_by_deployment ON tracing_projects (deployment_id);
`;
