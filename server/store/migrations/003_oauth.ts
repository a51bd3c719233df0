import type { SchemaDialect } from '../db.ts';

/**
 * OAuth helper: providers per organization, authorization flows (by the hash of their `state`)
 * and the tokens they obtained. Client secrets, PKCE verifiers and tokens are stored sealed by
 * the SecretBox (`v1:…`), never in clear text.
 */
export default (d: SchemaDialect) => `
CREATE TABLE oauth_providers (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  provider_id TEXT NOT NULL,
  name TEXT NOT NULL,
  client_id TEXT NOT NULL,
  client_secret_sealed TEXT NOT NULL,
  auth_url TEXT NOT NULL,
  token_url TEXT NOT NULL,
  uses_pkce INTEGER NOT NULL,
  code_challenge_method TEXT NOT NULL,
  token_endpoint_auth_method TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (organization_id, provider_id)
);

CREATE TABLE oauth_tokens (
  ${d.rowidColumn}
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  provider_ref TEXT NOT NULL REFERENCES oauth_providers(id) ON DELETE CASCADE,
  -- '' when not given: one token per (provider, user_id, agent_id)
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  scopes TEXT NOT NULL,
  access_token_sealed TEXT NOT NULL,
  refresh_token_sealed TEXT,
  token_type TEXT,
  expires_at TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  UNIQUE (provider_ref, user_id, agent_id)
);

CREATE TABLE oauth_flows (
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL REFERENCES organizations(id),
  provider_ref TEXT NOT NULL REFERENCES oauth_providers(id) ON DELETE CASCADE,
  state_hash TEXT NOT NULL UNIQUE,
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  scopes TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  code_verifier_sealed TEXT,
  -- pending -> exchanging -> completed | failed
  status TEXT NOT NULL,
  error TEXT,
  error_description TEXT,
  token_ref TEXT REFERENCES oauth_tokens(id) ON DELETE SET NULL,
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX oauth_flows_by_org ON oauth_flows (organization_id, created_at);
`;
