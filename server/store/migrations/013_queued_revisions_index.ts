import type { SchemaDialect } from '../db.ts';

/**
 * The queued revisions by deployment, so the sweep that finds deployments whose queued revision was
 * never started (a process died between queueing and starting it) seeks from one deployment with a
 * queued revision to the next (`stalledQueuedDeployments`) instead of walking every queued
 * revision: with tens of thousands queued, that walk paused the process every half lease.
 */
export default (_d: SchemaDialect) => `
CREATE INDEX revisions_queued ON revisions (deployment_id) WHERE status = 'QUEUED';
`;
