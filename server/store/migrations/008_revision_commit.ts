import type { SchemaDialect } from '../db.ts';

/**
 * The pushed commit of a revision as a column of its own, indexed per deployment, so the webhook's
 * "does this commit already have a revision?" check is a seek, not a read of the JSON of every
 * revision of the deployment (a cost that grows with its history). Filled from the JSON for
 * existing rows; the store keeps both in step on every insert.
 */
export default (d: SchemaDialect) => `
ALTER TABLE revisions ADD COLUMN commit_sha TEXT;
UPDATE revisions SET commit_sha = ${d.jsonText('source_revision_config', 'repo_commit_sha')};
CREATE INDEX revisions_by_commit ON revisions (deployment_id, commit_sha) WHERE commit_sha IS NOT NULL;
`;
