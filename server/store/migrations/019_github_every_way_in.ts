import type { SchemaDialect } from '../db.ts';

/**
 * GitHub round 2 (contract §19): linking from every way in.
 *
 * - `github_link_attempts`: one installation on its way to a workspace. Made when GitHub's
 *   redirect names an installation: with a `code`, the installer is proven at once; without one
 *   (an update, GitHub's own Install button, an approval, a retry) the browser is sent through
 *   GitHub's OAuth authorization with the attempt's id as its `state`. Once proven, the account is
 *   recorded and the installer confirms on a page naming the workspace, with a token only that
 *   page had (`confirm_hash`, its SHA-256). `setup_state_id` is the install URL's state, when the
 *   way in had one: it names the workspace and is used up only when the link is stored.
 * - `github_manifest_states`: the single-use `state` of a "create the App from its manifest"
 *   page, bound to the organization whose operator key asked for it.
 * - `github_app_registrations`: the App GitHub made from the manifest (one per control plane,
 *   `id` 1): its id and slug, and its private key, OAuth client and webhook secret sealed with
 *   the encryption key (`sealed`).
 */
export default (d: SchemaDialect) => `
CREATE TABLE github_link_attempts (
  id TEXT PRIMARY KEY,
  setup_state_id TEXT,
  installation_id ${d.bigint} NOT NULL,
  account_login TEXT,
  account_id ${d.bigint},
  account_type TEXT,
  confirm_hash TEXT,
  expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX github_link_attempts_expiry ON github_link_attempts (expires_at);

CREATE TABLE github_manifest_states (
  id TEXT PRIMARY KEY,
  organization_id TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL
);

CREATE TABLE github_app_registrations (
  id INTEGER PRIMARY KEY,
  app_id TEXT NOT NULL,
  slug TEXT NOT NULL,
  sealed TEXT NOT NULL,
  created_at TEXT NOT NULL
);
`;
