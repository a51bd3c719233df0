/**
 * An agent's "teardown done" is stored on the deployment being deleted, so a report that arrives
 * before the pipeline begins to wait for it is not lost (see SQLite's migration 011, kept
 * equivalent).
 */
export default `
ALTER TABLE deployments ADD COLUMN teardown_reported_at TEXT;
`;
