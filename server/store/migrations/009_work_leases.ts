import type { SchemaDialect } from '../db.ts';

/**
 * Who does each piece of work, and until when: several server processes share
 * one database, so a started revision, a deployment's teardown, a webhook delivery being processed
 * and an upload being received each name the process that holds it and when its lease ends. A
 * process renews what it holds; another takes over what a dead one left once its lease has passed.
 */
export default (_d: SchemaDialect) => `
ALTER TABLE revisions ADD COLUMN runner_id TEXT;
ALTER TABLE revisions ADD COLUMN lease_expires_at TEXT;
ALTER TABLE deployments ADD COLUMN teardown_owner TEXT;
ALTER TABLE deployments ADD COLUMN teardown_lease_expires_at TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN claimed_by TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN claim_expires_at TEXT;
ALTER TABLE uploads ADD COLUMN receiver_id TEXT;
ALTER TABLE uploads ADD COLUMN receive_lease_expires_at TEXT;
CREATE INDEX uploads_receiving ON uploads (receive_lease_expires_at) WHERE state = 'receiving';
`;
