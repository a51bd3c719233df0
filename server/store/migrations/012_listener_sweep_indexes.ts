import type { SchemaDialect } from '../db.ts';

/**
 * The silent-listener sweep (every half lease in every process) and an agent's heartbeat found the
 * deployments a listener serves by joining every deployment to its serving listener through
 * `COALESCE(listener_id, workspace default)`, an expression no index answers: a scan of all
 * deployments each time (18–49 ms at 34,000 deployments, a pause of the whole server). They now
 * start from the agent listeners themselves and seek their deployments (`deployments_by_listener`,
 * and through the workspaces a listener is the default of). Kept equivalent to PostgreSQL's
 * migration 005.
 */
export default (_d: SchemaDialect) => `
CREATE INDEX listeners_agents_by_last_seen ON listeners (last_seen_at) WHERE compute_type IN ('local', 'k8s');
CREATE INDEX workspaces_by_default_listener ON workspaces (default_listener_id);
`;
