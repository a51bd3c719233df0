/** Upload quota reservations and log caps (see SQLite's migration 014, kept equivalent). */
export default `
ALTER TABLE uploads ADD COLUMN reserved_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_lines INTEGER NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE revisions ADD COLUMN log_marker_seq BIGINT;
CREATE INDEX uploads_by_tenant ON uploads (tenant_id, state);
`;
