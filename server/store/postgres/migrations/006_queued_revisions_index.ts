/**
 * The queued revisions by deployment, for the stalled-queue sweep's seek from one deployment with a
 * queued revision to the next (see SQLite's migration 013, kept equivalent).
 */
export default `
CREATE INDEX revisions_queued ON revisions (deployment_id) WHERE status = 'QUEUED';
`;
