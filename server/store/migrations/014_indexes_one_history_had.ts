import type { SchemaDialect } from '../db.ts';

/**
 * Indexes only the PostgreSQL databases had (their released history made them in its first
 * version), now on both, so that both hold the same schema; IF NOT EXISTS, as such a database has
 * them already:
 * - one push revision per commit of a deployment while it has not failed: two deliveries of one
 *   push racing each other cannot both insert it (the store also locks the deployment row first;
 *   SQLite's single writer never needed it);
 * - an organization's API keys, and its default workspace.
 */
export default (_d: SchemaDialect) => `
CREATE UNIQUE INDEX IF NOT EXISTS revisions_one_push_per_commit ON revisions (deployment_id, commit_sha)
  WHERE trigger = 'push' AND commit_sha IS NOT NULL AND status NOT IN ('CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'INTERRUPTED');
CREATE INDEX IF NOT EXISTS api_keys_by_org ON api_keys (organization_id);
CREATE INDEX IF NOT EXISTS workspaces_default ON workspaces (organization_id) WHERE is_default = 1;
`;
