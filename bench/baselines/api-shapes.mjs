/**
 * What the bare baselines (http-sqlite.mjs, http-pg.mjs) and the in-process lane bench
 * (fast-lane-cpu.ts) do exactly as the server does, so they answer the same bytes and store the
 * same values: the answers' field order, the create's configs, the SecretBox format. Whatever
 * differs between them (the SQL, the driver) stays in each.
 */
import { createCipheriv, randomBytes, randomUUID } from 'node:crypto';

/**
 * The ids of a create's deployment, revision and tracing project: with BASELINE_IDS=time-ordered the
 * server's own (server/lib/time-ordered-id.ts, loaded only then, so a baseline that does not ask
 * stays plain JavaScript), random otherwise (docs/decisions/time-ordered-ids.md).
 */
export const newRowId = process.env.BASELINE_IDS === 'time-ordered' ? (await import('../../server/lib/time-ordered-id.ts')).timeOrderedId : randomUUID;

export const REVISION_PATH = /^\/v2\/deployments\/([0-9a-f-]{36})\/revisions\/([0-9a-f-]{36})$/;

export function send(res, status, text, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** A revision answer's bytes from its stored row, fields in the server's order (`publicRevision`). */
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

/** The server's SecretBox format with `key`: `v1:<iv>:<tag>:<ciphertext>`, base64url. */
export function sealer(key) {
  return (value) => {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    const ciphertext = Buffer.concat([cipher.update(JSON.stringify(value), 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join(':');
  };
}

/** A github create's stored configs, with the server's defaults, and the key its repository is found by. */
export function createConfigs(input) {
  const sourceConfig = {
    ...input.source_config,
    deployment_type: input.source_config.deployment_type ?? 'dev',
    build_on_push: Boolean(input.source_config.build_on_push),
  };
  const revisionConfig = { ...input.source_revision_config, image_uri: null, repo_commit_sha: null };
  const repoUrlKey = String(sourceConfig.repo_url)
    .toLowerCase()
    .replace(/\.git$/, '');
  return { sourceConfig, revisionConfig, repoUrlKey };
}

/** A created deployment's answer, fields in the server's order. */
export function deploymentAnswerText({ id, tenantId, name, sourceConfig, revisionConfig, status, revisionId, now }) {
  return JSON.stringify({
    id,
    tenant_id: tenantId,
    name,
    source: 'github',
    source_config: sourceConfig,
    source_revision_config: revisionConfig,
    status,
    latest_revision_id: revisionId,
    created_at: now,
    updated_at: now,
  });
}
