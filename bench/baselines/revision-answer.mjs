/**
 * The bytes of a revision answer from its stored row, with the fields in the server's order
 * (`publicRevision`), so a bare baseline answers exactly what the server does. Shared by the bare
 * servers (http-sqlite.mjs, http-pg.mjs) and the in-process lane bench (fast-lane-cpu.ts).
 */
export function revisionAnswerText(row) {
  return JSON.stringify({
    id: row.id,
    deployment_id: row.deployment_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
    status: row.status,
    status_message: row.status_message ?? null,
    source: row.source,
    source_revision_config: JSON.parse(row.source_revision_config),
    trigger: row.trigger,
  });
}
