import type { SchemaDialect } from '../db.ts';

/**
 * Deliveries addressed to one workspace (repository webhooks signed with that workspace's own
 * secret), and those secrets, encrypted at rest.
 */
export default (_d: SchemaDialect) => `
-- The workspace a repository-webhook delivery was verified for; NULL for the GitHub App's
-- deliveries, which are addressed by the installation they name.
ALTER TABLE webhook_deliveries ADD COLUMN workspace_id TEXT;

-- Each workspace's repository-webhook secret (SecretBox-encrypted: an HMAC check needs the secret
-- itself, so it cannot be hashed). After a rotation the previous one is accepted until
-- previous_valid_until, or until the next rotation replaces it.
CREATE TABLE webhook_workspace_secrets (
  tenant_id TEXT PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
  secret_enc TEXT NOT NULL,
  previous_secret_enc TEXT,
  previous_valid_until TEXT,
  created_at TEXT NOT NULL
);
`;
