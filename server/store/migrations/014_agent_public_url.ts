/**
 * The URL template a listener's agent serves deployments under (`--public-url`, with `{name}`),
 * reported with its heartbeat; a deployment it deploys gets its `custom_url` from it. Kept
 * equivalent to PostgreSQL's migration 007.
 */
export default `
ALTER TABLE listeners ADD COLUMN agent_public_url TEXT;
`;
