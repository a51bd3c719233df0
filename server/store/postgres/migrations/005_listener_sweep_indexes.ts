/**
 * Indexes for the silent-listener sweep and an agent's heartbeat, which now start from the agent
 * listeners and seek their deployments instead of scanning every deployment (see SQLite's
 * migration 012, kept equivalent).
 */
export default `
CREATE INDEX listeners_agents_by_last_seen ON listeners (last_seen_at) WHERE compute_type IN ('local', 'k8s');
CREATE INDEX workspaces_by_default_listener ON workspaces (default_listener_id);
`;
