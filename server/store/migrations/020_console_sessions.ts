/**
 * The web console's sessions (contract section 16): a browser's session cookie, kept only as the
 * SHA-256 of its token, tied to the API key it was signed in with (revoking the key ends it) and to
 * the workspace the session currently shows.
 */
import type { SchemaDialect } from '../db.ts';

export default (_d: SchemaDialect) => `
CREATE TABLE console_sessions (
  token_hash TEXT PRIMARY KEY,
  key_id TEXT NOT NULL REFERENCES api_keys(id),
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
CREATE INDEX console_sessions_by_key ON console_sessions (key_id);
`;
