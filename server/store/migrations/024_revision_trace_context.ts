import type { SchemaDialect } from '../db.ts';

/**
 * The trace context of a revision (contract §17, traces): the W3C `traceparent` of the request or
 * GitHub delivery that made it, the parent of every span of the revision (the agents' included,
 * which get it with the claimed work). Null when none came.
 */
export default (_d: SchemaDialect) => `
ALTER TABLE revisions ADD COLUMN traceparent TEXT;
`;
