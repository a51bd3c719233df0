/**
 * Upload quota reservations and log caps. `uploads.reserved_bytes`: what a PUT in progress has
 * reserved of its workspace's quota (checked and taken under one lock, so concurrent PUTs cannot
 * overshoot it; settled into `size` when complete, given back when it fails). `revisions.log_*`:
 * the lines and bytes of log stored for a revision, the lines dropped past its cap, and the one
 * marker line that says so. Kept equivalent to PostgreSQL's migration 007.
 */
export default `
ALTER TABLE uploads ADD COLUMN reserved_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_lines INTEGER NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_marker_seq INTEGER;
CREATE INDEX uploads_by_tenant ON uploads (tenant_id, state);
`;
