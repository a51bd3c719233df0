import type { SchemaDialect } from '../db.ts';

/**
 * An agent's "teardown done" is stored on the deployment being deleted: the report used to reach
 * only the pipelines waiting at that moment (in memory, and across processes by a notice), so a
 * report that came before the pipeline began to wait (the agent was quick, the pipeline's process
 * slow or just taken over) was lost, and the teardown waited for an agent that had finished. A
 * teardown that starts waiting reads it; a reported teardown is no longer offered to agents.
 * Kept equivalent to PostgreSQL's migration 004.
 */
export default (_d: SchemaDialect) => `
ALTER TABLE deployments ADD COLUMN teardown_reported_at TEXT;
`;
