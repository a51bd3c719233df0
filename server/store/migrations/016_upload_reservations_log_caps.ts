import type { SchemaDialect } from '../db.ts';

/**
 * Upload quota reservations and log caps. `uploads.reserved_bytes`: what a PUT in progress has
 * reserved of its workspace's quota (checked and taken under one lock of the workspace, so
 * concurrent PUTs cannot overshoot it; settled into `size` when complete, given back when it
 * fails). `revisions.log_*`: the lines and bytes of log stored for a revision, the lines dropped
 * past its cap, and the one marker line that says so.
 */
export default (d: SchemaDialect) => `
ALTER TABLE uploads ADD COLUMN reserved_bytes ${d.bigint} NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_lines INTEGER NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_bytes ${d.bigint} NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_marker_seq ${d.bigint};
CREATE INDEX uploads_by_tenant ON uploads (tenant_id, state);
`;
