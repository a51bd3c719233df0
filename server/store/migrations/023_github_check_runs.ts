import type { SchemaDialect } from '../db.ts';

/**
 * GitHub round 2 (contract §19, "Checks"): `github_check_runs`, the check run `deploy/<name>` made
 * for each revision (where the installation grants `checks: write`), to update it as the revision
 * moves on and to find its revision when GitHub's "Re-run" names it.
 */
export default (d: SchemaDialect) => `
CREATE TABLE github_check_runs (
  revision_id TEXT PRIMARY KEY,
  check_run_id ${d.bigint} NOT NULL,
  installation_id ${d.bigint} NOT NULL,
  owner TEXT NOT NULL,
  repo TEXT NOT NULL,
  created_at TEXT NOT NULL
);
`;
