import type { SchemaDialect } from '../db.ts';

/**
 * An agent's "teardown done" is stored on the deployment being deleted, so a report that comes
 * before the pipeline begins to wait for it (the agent was quick, the pipeline's process slow or
 * just taken over) is not lost: a teardown that starts waiting reads it, and a reported teardown
 * is no longer offered to agents.
 */
export default (_d: SchemaDialect) => `
ALTER TABLE deployments ADD COLUMN teardown_reported_at TEXT;
`;
