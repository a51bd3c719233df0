/**
 * The whole schema as the SQLite migrations 001–008 left it, in PostgreSQL terms:
 * - `rowid` (an identity column) where the SQLite queries break ties by SQLite's rowid, so both
 *   backends list rows in the same order;
 * - JSON kept as the text the store wrote (answers are byte-identical: same key order);
 * - timestamps as the same ISO-8601 text; flags as 0/1 integers, as in SQLite;
 * - upload chunks as `bytea`;
 * - a partial unique index: one live push revision per commit of a deployment.
 */
export default `
CREATE TABLE organizations (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL
);

CREATE TABLE workspaces (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  name TEXT NOT NULL,
  is_default INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  default_listener_id TEXT,
  UNIQUE (organization_id, name)
);
CREATE INDEX workspaces_default ON workspaces (organization_id) WHERE is_default = 1;

CREATE TABLE api_keys (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  workspace_id TEXT REFERENCES workspaces(id),
  key_hash TEXT NOT NULL UNIQUE,
  description TEXT,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE INDEX api_keys_by_org ON api_keys (organization_id);

CREATE TABLE listeners (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  compute_type TEXT NOT NULL,
  compute_id TEXT NOT NULL,
  compute_config TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  version TEXT,
  last_seen_at TEXT,
  agent_version TEXT,
  agent_capacity INTEGER,
  UNIQUE (tenant_id, compute_id)
);

ALTER TABLE workspaces ADD CONSTRAINT workspaces_default_listener
  FOREIGN KEY (default_listener_id) REFERENCES listeners(id) ON DELETE SET NULL;

-- A workspace's first sandbox listener (created with the workspace) becomes its default.
CREATE FUNCTION listeners_sandbox_default() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE workspaces SET default_listener_id = NEW.id WHERE id = NEW.tenant_id AND default_listener_id IS NULL;
  RETURN NULL;
END;
$$;
CREATE TRIGGER listeners_sandbox_default AFTER INSERT ON listeners
  FOR EACH ROW WHEN (NEW.compute_type = 'sandbox') EXECUTE FUNCTION listeners_sandbox_default();

CREATE TABLE github_integrations (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  installation_id BIGINT NOT NULL,
  name TEXT NOT NULL,
  suspended_at TEXT,
  created_at TEXT NOT NULL,
  UNIQUE (tenant_id, installation_id)
);
CREATE INDEX github_integrations_by_installation ON github_integrations (installation_id);

CREATE TABLE deployments (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  name TEXT NOT NULL,
  source TEXT NOT NULL,
  source_config TEXT NOT NULL,
  source_revision_config TEXT NOT NULL,
  secrets TEXT NOT NULL,
  status TEXT NOT NULL,
  latest_revision_id TEXT,
  active_revision_id TEXT,
  image_version TEXT,
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
CREATE INDEX deployments_by_repo ON deployments (repo_url_key);

CREATE TABLE revisions (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  deployment_id TEXT NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  status TEXT NOT NULL,
  status_message TEXT,
  source TEXT NOT NULL,
  source_revision_config TEXT NOT NULL,
  commit_sha TEXT,
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
CREATE INDEX revisions_by_commit ON revisions (deployment_id, commit_sha) WHERE commit_sha IS NOT NULL;
-- One push revision per commit of a deployment while it has not failed: two deliveries of one push
-- racing each other cannot both insert (the store also locks the deployment row first).
CREATE UNIQUE INDEX revisions_one_push_per_commit ON revisions (deployment_id, commit_sha)
  WHERE trigger = 'push' AND commit_sha IS NOT NULL AND status NOT IN ('CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED');

CREATE TABLE revision_logs (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  revision_id TEXT NOT NULL REFERENCES revisions(id) ON DELETE CASCADE,
  type TEXT NOT NULL,
  level TEXT NOT NULL,
  message TEXT NOT NULL,
  timestamp TEXT NOT NULL
);
CREATE INDEX revision_logs_by_revision ON revision_logs (revision_id, type, seq);

CREATE TABLE tracing_projects (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  name TEXT NOT NULL,
  deployment_id TEXT,
  created_at TEXT NOT NULL,
  UNIQUE (tenant_id, name)
);
CREATE INDEX tracing_projects_by_deployment ON tracing_projects (deployment_id);

CREATE TABLE webhook_deliveries (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id TEXT NOT NULL UNIQUE,
  event TEXT NOT NULL,
  action TEXT,
  installation_id BIGINT,
  repository TEXT,
  ref TEXT,
  after_sha TEXT,
  payload TEXT,
  status TEXT NOT NULL,
  summary TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  received_at TEXT NOT NULL,
  processed_at TEXT,
  workspace_id TEXT
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_received ON webhook_deliveries (received_at);

CREATE TABLE webhook_delivery_tenants (
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(delivery_id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  PRIMARY KEY (tenant_id, delivery_id)
);
CREATE INDEX webhook_delivery_tenants_by_delivery ON webhook_delivery_tenants (delivery_id);

CREATE TABLE webhook_delivery_results (
  seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(delivery_id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  deployment_id TEXT,
  deployment_name TEXT,
  integration_id TEXT,
  result TEXT NOT NULL,
  revision_id TEXT,
  reason TEXT
);
CREATE INDEX webhook_delivery_results_by_delivery ON webhook_delivery_results (delivery_id, tenant_id);

CREATE TABLE reconcile_heads (
  deployment_id TEXT PRIMARY KEY REFERENCES deployments(id) ON DELETE CASCADE,
  repo_ref TEXT NOT NULL,
  sha TEXT NOT NULL,
  seen_at TEXT NOT NULL
);

CREATE TABLE webhook_workspace_secrets (
  tenant_id TEXT PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
  secret_enc TEXT NOT NULL,
  previous_secret_enc TEXT,
  previous_valid_until TEXT,
  created_at TEXT NOT NULL
);

CREATE TABLE oauth_providers (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  provider_id TEXT NOT NULL,
  name TEXT NOT NULL,
  client_id TEXT NOT NULL,
  client_secret_sealed TEXT,
  auth_url TEXT NOT NULL,
  token_url TEXT NOT NULL,
  uses_pkce INTEGER NOT NULL,
  code_challenge_method TEXT NOT NULL,
  token_endpoint_auth_method TEXT NOT NULL,
  provider_type TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (organization_id, provider_id)
);

CREATE TABLE oauth_tokens (
  rowid BIGINT GENERATED ALWAYS AS IDENTITY,
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  provider_ref TEXT NOT NULL REFERENCES oauth_providers(id) ON DELETE CASCADE,
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  scopes TEXT NOT NULL,
  access_token_sealed TEXT NOT NULL,
  refresh_token_sealed TEXT,
  token_type TEXT,
  expires_at TEXT,
  is_default INTEGER NOT NULL DEFAULT 1,
  provider_account_label TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (provider_ref, workspace_id, user_id, agent_id)
);
CREATE INDEX oauth_tokens_by_workspace ON oauth_tokens (workspace_id, provider_ref);

CREATE TABLE oauth_flows (
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  provider_ref TEXT NOT NULL REFERENCES oauth_providers(id) ON DELETE CASCADE,
  state_hash TEXT NOT NULL UNIQUE,
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  scopes TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  code_verifier_sealed TEXT,
  is_default INTEGER NOT NULL DEFAULT 1,
  status TEXT NOT NULL,
  error TEXT,
  error_description TEXT,
  token_ref TEXT REFERENCES oauth_tokens(id) ON DELETE SET NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX oauth_flows_by_org ON oauth_flows (organization_id, created_at);

CREATE TABLE uploads (
  id TEXT PRIMARY KEY,
  deployment_id TEXT NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  object_path TEXT NOT NULL UNIQUE,
  state TEXT NOT NULL,
  size BIGINT,
  expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  completed_at TEXT
);
CREATE INDEX uploads_by_deployment ON uploads (deployment_id);

CREATE TABLE upload_chunks (
  upload_id TEXT NOT NULL REFERENCES uploads(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY (upload_id, seq)
);

CREATE TABLE github_installation_repos (
  installation_id BIGINT NOT NULL,
  repo_id BIGINT NOT NULL,
  name TEXT NOT NULL,
  owner TEXT NOT NULL,
  url TEXT NOT NULL,
  default_branch TEXT,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, repo_id)
);

CREATE TABLE listener_tokens (
  id TEXT PRIMARY KEY,
  listener_id TEXT NOT NULL REFERENCES listeners(id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE INDEX listener_tokens_by_listener ON listener_tokens (listener_id);

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
`;
