import type { SchemaDialect } from '../db.ts';

/**
 * Indexes so the silent-listener sweep (every half lease in every process) and an agent's
 * heartbeat start from the agent listeners and seek their deployments (`deployments_by_listener`,
 * and through the workspaces a listener is the default of), instead of joining every deployment to
 * its serving listener through `COALESCE(listener_id, workspace default)`, an expression no index
 * answers: a scan of all deployments each time, which paused the whole server at tens of thousands.
 */
export default (_d: SchemaDialect) => `
CREATE INDEX listeners_agents_by_last_seen ON listeners (last_seen_at) WHERE compute_type IN ('local', 'k8s');
CREATE INDEX workspaces_by_default_listener ON workspaces (default_listener_id);
`;
