import type { SchemaDialect } from '../db.ts';

/**
 * Drop-in compatibility with the hosted API: uploaded source tarballs of `internal_source`
 * deployments (stored in ≤ 1 MiB chunk rows, so an upload is never held whole in memory and every
 * replica can serve it), the repositories GitHub reported for each installation, and listener `version`.
 */
export default (d: SchemaDialect) => `
CREATE TABLE uploads (
  id TEXT PRIMARY KEY,
  deployment_id TEXT NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  tenant_id TEXT NOT NULL,
  object_path TEXT NOT NULL UNIQUE,
  -- issued: URL handed out, nothing stored; receiving: a PUT is streaming chunks in; complete: usable
  state TEXT NOT NULL,
  size ${d.bigint},
  expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  completed_at TEXT
);
CREATE INDEX uploads_by_deployment ON uploads (deployment_id);

CREATE TABLE upload_chunks (
  upload_id TEXT NOT NULL REFERENCES uploads(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  data ${d.bytes} NOT NULL,
  PRIMARY KEY (upload_id, seq)
);

CREATE TABLE github_installation_repos (
  installation_id ${d.bigint} NOT NULL,
  repo_id ${d.bigint} NOT NULL,
  name TEXT NOT NULL,
  owner TEXT NOT NULL,
  url TEXT NOT NULL,
  default_branch TEXT,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (installation_id, repo_id)
);

ALTER TABLE listeners ADD COLUMN version TEXT;
`;
