import type { SchemaDialect } from '../db.ts';

/**
 * The deployments' listener and repository indexes hold only the deployments that name one. Every
 * statement that reads them asks for a value (`listener_id = ?`, `repo_url_key = ?`), which both
 * databases prove implies NOT NULL, so the same seeks use them; the deployments naming none (a
 * github deployment names no listener, an upload no repository) no longer cost each create an
 * index insert that nothing ever read (on PostgreSQL a create wrote 18 index entries:
 * docs/decisions/postgresql-three-processes.md, session 48).
 */
export default (_d: SchemaDialect) => `
DROP INDEX deployments_by_listener;
CREATE INDEX deployments_by_listener ON deployments (listener_id) WHERE listener_id IS NOT NULL;
DROP INDEX deployments_by_repo;
CREATE INDEX deployments_by_repo ON deployments (repo_url_key) WHERE repo_url_key IS NOT NULL;
`;
