import type { SchemaDialect } from '../db.ts';

/**
 * The queued revisions by deployment: the sweep that finds deployments whose queued revision was
 * never started (a process died between queueing and starting it) walked every queued revision of
 * every deployment through `revisions_unfinished`, ~10 ms every half lease with the 37,000 queued
 * PATCH revisions of issue 13's benchmark. It now seeks from one deployment with a queued revision
 * to the next (`LEASE_QUERIES.stalledQueuedDeployments`). Kept equivalent to PostgreSQL's migration 006.
 */
export default (_d: SchemaDialect) => `
CREATE INDEX revisions_queued ON revisions (deployment_id) WHERE status = 'QUEUED';
`;
