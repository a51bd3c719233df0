/**
 * Keyless CI (contract section 13): the GitHub repositories each workspace trusts, the ID-token
 * `jti`s already exchanged (each is used once; a row lives until its token has expired), and on
 * API keys the expiry and the token claims a minted key was made for (NULL on ordinary keys).
 */
import type { SchemaDialect } from '../db.ts';

export default (_d: SchemaDialect) => `
CREATE TABLE github_trust_entries (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL REFERENCES workspaces(id),
  repository_id TEXT NOT NULL,
  repository_owner_id TEXT NOT NULL,
  ref TEXT,
  environment TEXT,
  job_workflow_ref TEXT,
  description TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX github_trust_by_repository ON github_trust_entries (repository_id, repository_owner_id);
CREATE INDEX github_trust_by_tenant ON github_trust_entries (tenant_id, created_at);

CREATE TABLE github_oidc_used_jti (
  jti TEXT PRIMARY KEY,
  expires_at TEXT NOT NULL
);
CREATE INDEX github_oidc_used_jti_expiry ON github_oidc_used_jti (expires_at);

ALTER TABLE api_keys ADD COLUMN expires_at TEXT;
ALTER TABLE api_keys ADD COLUMN minted_for TEXT;
CREATE INDEX api_keys_expiring ON api_keys (expires_at) WHERE expires_at IS NOT NULL;
`;
