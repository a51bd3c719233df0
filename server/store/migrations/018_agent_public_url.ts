import type { SchemaDialect } from '../db.ts';

/**
 * The URL template a listener's agent serves deployments under (`--public-url`, with `{name}`),
 * reported with its heartbeat; a deployment it deploys gets its `custom_url` from it.
 */
export default (_d: SchemaDialect) => `
ALTER TABLE listeners ADD COLUMN agent_public_url TEXT;
`;
