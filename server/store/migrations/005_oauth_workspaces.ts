import type { SchemaDialect } from '../db.ts';

/**
 * OAuth:
 * - providers: `client_secret_sealed` may be NULL (a public client, `token_endpoint_auth_method`
 *   `none`, which must use PKCE); `provider_type` as the hosted API names it (null when not given).
 * - tokens and flows belong to the **workspace** whose flow obtained them (before: the
 *   organization), so a workspace-scoped key cannot read or replace another workspace's token for
 *   the same `user_id`. Tokens carry the hosted API's metadata (`is_default`,
 *   `provider_account_label`). Existing rows go to their organization's default workspace, which
 *   is where an organization-scoped key without `X-Tenant-Id` made them.
 *
 * SQLite cannot change a column's NOT NULL or a table's UNIQUE in place, so the three tables are
 * rebuilt: new tables are created and filled, the old ones dropped (children first, so no ON DELETE
 * action fires), and the new ones renamed, which rewrites the REFERENCES clauses that name them.
 */
export default (d: SchemaDialect) => `
CREATE TABLE oauth_providers_v5 (
  ${d.rowidColumn}
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
INSERT INTO oauth_providers_v5 (id, organization_id, provider_id, name, client_id, client_secret_sealed, auth_url, token_url,
    uses_pkce, code_challenge_method, token_endpoint_auth_method, provider_type, created_at, updated_at)
  SELECT id, organization_id, provider_id, name, client_id, client_secret_sealed, auth_url, token_url,
    uses_pkce, code_challenge_method, token_endpoint_auth_method, NULL, created_at, updated_at
  FROM oauth_providers;

CREATE TABLE oauth_tokens_v5 (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  provider_ref TEXT NOT NULL REFERENCES oauth_providers_v5(id) ON DELETE CASCADE,
  -- '' when not given: one token per (provider, workspace, user_id, agent_id)
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
INSERT INTO oauth_tokens_v5 (id, organization_id, workspace_id, provider_ref, user_id, agent_id, scopes, access_token_sealed,
    refresh_token_sealed, token_type, expires_at, is_default, provider_account_label, created_at, updated_at)
  SELECT t.id, t.organization_id,
    (SELECT w.id FROM workspaces w WHERE w.organization_id = t.organization_id AND w.is_default = 1 LIMIT 1),
    t.provider_ref, t.user_id, t.agent_id, t.scopes, t.access_token_sealed, t.refresh_token_sealed, t.token_type, t.expires_at,
    1, NULL, t.created_at, t.updated_at
  FROM oauth_tokens t;

CREATE TABLE oauth_flows_v5 (
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  provider_ref TEXT NOT NULL REFERENCES oauth_providers_v5(id) ON DELETE CASCADE,
  state_hash TEXT NOT NULL UNIQUE,
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  scopes TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  code_verifier_sealed TEXT,
  is_default INTEGER NOT NULL DEFAULT 1,
  -- pending -> exchanging -> completed | failed
  status TEXT NOT NULL,
  error TEXT,
  -- sealed from now on: it may quote the provider's answer
  error_description TEXT,
  token_ref TEXT REFERENCES oauth_tokens_v5(id) ON DELETE SET NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
INSERT INTO oauth_flows_v5 (id, organization_id, workspace_id, provider_ref, state_hash, user_id, agent_id, scopes, redirect_uri,
    code_verifier_sealed, is_default, status, error, error_description, token_ref, created_at, expires_at, updated_at)
  SELECT f.id, f.organization_id,
    (SELECT w.id FROM workspaces w WHERE w.organization_id = f.organization_id AND w.is_default = 1 LIMIT 1),
    f.provider_ref, f.state_hash, f.user_id, f.agent_id, f.scopes, f.redirect_uri, f.code_verifier_sealed, 1, f.status, f.error,
    NULL, f.token_ref, f.created_at, f.expires_at, f.updated_at
  FROM oauth_flows f;

DROP TABLE oauth_flows;
DROP TABLE oauth_tokens;
DROP TABLE oauth_providers;
ALTER TABLE oauth_providers_v5 RENAME TO oauth_providers;
ALTER TABLE oauth_tokens_v5 RENAME TO oauth_tokens;
ALTER TABLE oauth_flows_v5 RENAME TO oauth_flows;
CREATE INDEX oauth_flows_by_org ON oauth_flows (organization_id, created_at);
CREATE INDEX oauth_tokens_by_workspace ON oauth_tokens (workspace_id, provider_ref);
`;
