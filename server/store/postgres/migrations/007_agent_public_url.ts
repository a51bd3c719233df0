/**
 * The URL template a listener's agent serves deployments under (see SQLite's migration 014, kept
 * equivalent).
 */
export default `
ALTER TABLE listeners ADD COLUMN agent_public_url TEXT;
`;
