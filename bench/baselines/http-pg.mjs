// Baseline 3: bare node:http + pg doing what the control plane's two hot paths do on PostgreSQL, in
// the same SQL, with none of its framework: the floor for a JSON API on one PostgreSQL database.
// Plain JavaScript (no TypeScript stripper loaded, unless BASELINE_PIPELINE=1 asks for the server's pipeline).
//
// It opens the database the measured server uses (`BASELINE_DATABASE_URL`), after the server made
// its deployments there, and at start reads the newest create's rows (its revision, revision log
// line and audit entry) to write copies of: the same tables, indexes, triggers and row sizes.
// - `GET /v2/deployments/:id/revisions/:rid`: the store's revision read
//   (`SELECT <the record's columns, BASELINE_REVISION_COLUMNS> FROM revisions WHERE id = $1 AND deployment_id = $2 AND tenant_id = $3`), one
//   statement on a pooled connection, answered as the server answers it;
// - `POST /v2/deployments`: the JSON body, the integration read with the serving listener's compute
//   type (one statement, as the server's github create makes it), then the create's five writes
//   (deployment, revision naming its runner if its lease is live, tracing project adopted or
//   inserted in one upsert, the revision's first log line, the audit entry) in one transaction, as
//   node-postgres code does it: BEGIN, five statements, COMMIT, each a round trip. With
//   BASELINE_PIPELINE=1 (what the cluster scenario runs) the writes go in one round trip instead, through the server's own
//   `StatementPipeline`, the transaction shape of the server's create (`PgDb.batch`).
// No API key check, no validation beyond JSON, secrets sealed as the server does (AES-256-GCM).
// Settings: BASELINE_DATABASE_URL, BASELINE_TENANT_ID, BASELINE_ENCRYPTION_KEY (base64, 32 bytes),
// BASELINE_POOL_SIZE (10, the server's default), BASELINE_PIPELINE, BASELINE_IDS (random | time-ordered:
// the deployment's, revision's and tracing project's ids made as the server makes them,
// server/lib/time-ordered-id.ts, so that the same keys go into the same indexes; the cluster scenario
// asks for it).

import { createSecretKey, randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import pg from 'pg';
import { createConfigs, deploymentAnswerText, newRowId, REVISION_PATH, revisionAnswerText, sealer, send } from './api-shapes.mjs';

const tenantId = process.env.BASELINE_TENANT_ID;
const key = createSecretKey(Buffer.from(process.env.BASELINE_ENCRYPTION_KEY ?? randomBytes(32).toString('base64'), 'base64'));
// 64-bit integers as numbers, as the server's pool reads them.
const types = { getTypeParser: (oid, format) => (oid === 20 && format !== 'binary' ? Number : pg.types.getTypeParser(oid, format)) };
const pool = new pg.Pool({ connectionString: process.env.BASELINE_DATABASE_URL, max: Number(process.env.BASELINE_POOL_SIZE ?? 10), types });
pool.on('error', () => {});
const pipelined = process.env.BASELINE_PIPELINE === '1' ? (await import('../../server/store/postgres/pipeline.ts')).StatementPipeline : null;

// The server's own column list (REVISION_RECORD_COLUMNS), given by the benchmark; * when unset.
const READ_REVISION = `SELECT ${process.env.BASELINE_REVISION_COLUMNS ?? '*'} FROM revisions WHERE id = $1 AND deployment_id = $2 AND tenant_id = $3`;
// A github create's one read: its integration and the workspace default listener's compute type (the server's integrationForCreate).
const READ_INTEGRATION = `SELECT i.*, (SELECT l.compute_type FROM listeners l
    WHERE l.tenant_id = i.tenant_id AND l.id = (SELECT w.default_listener_id FROM workspaces w WHERE w.id = i.tenant_id)) AS serving_compute_type
  FROM github_integrations i WHERE i.id = $1 AND i.tenant_id = $2`;
const INSERT_DEPLOYMENT = `INSERT INTO deployments (id, tenant_id, name, source, source_config, source_revision_config, secrets, status,
    latest_revision_id, active_revision_id, image_version, deployment_type, integration_id, listener_id,
    repo_url_key, repo_ref, build_on_push, created_at, updated_at)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, NULL, $10, $11, NULL, $12, $13, $14, $15, $15)`;
const INSERT_REVISION = `INSERT INTO revisions (id, deployment_id, tenant_id, status, status_message, source, source_revision_config, commit_sha, secrets, resource_spec, trigger, traceparent, created_at, updated_at, runner_id)
    VALUES ($1, $2, $3, $4, NULL, $5, $6, NULL, $7, NULL, 'create', NULL, $8, $8,
      (SELECT process_id FROM process_leases WHERE process_id = $9 AND lease_expires_at >= $8 FOR KEY SHARE))
    RETURNING runner_id`;
// The tracing project adopted or inserted in one statement, as the server's create does it.
const ADOPT_OR_INSERT_TRACING_PROJECT = `INSERT INTO tracing_projects (id, tenant_id, name, deployment_id, created_at) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (tenant_id, name) DO UPDATE SET deployment_id = excluded.deployment_id WHERE tracing_projects.deployment_id IS NULL`;
const INSERT_LOG = 'INSERT INTO revision_logs (revision_id, type, level, message, timestamp) VALUES ($1, $2, $3, $4, $5)';
const INSERT_AUDIT = `INSERT INTO audit_events (id, organization_id, workspace_id, actor_kind, actor_id, actor_scope, address, user_agent, action, resource_type,
    resource_id, route, fields, outcome, status, request_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`;

// The newest create the server made: the rows a create of ours copies.
const template = await (async () => {
  const revision = (await pool.query("SELECT * FROM revisions WHERE tenant_id = $1 AND trigger = 'create' ORDER BY seq DESC LIMIT 1", [tenantId])).rows[0];
  const log = (await pool.query('SELECT * FROM revision_logs WHERE revision_id = $1 ORDER BY seq LIMIT 1', [revision.id])).rows[0];
  const audit = (await pool.query("SELECT * FROM audit_events WHERE resource_id = $1 AND action = 'create'", [revision.deployment_id])).rows[0];
  if (!log || !audit) throw new Error('http-pg: the newest create has no log line or audit entry to copy');
  return { revision, log, audit };
})();

const seal = sealer(key);

/** The create's six writes as [text, values]. */
function createWrites(row) {
  const { revision, log, audit } = template;
  return [
    [
      INSERT_DEPLOYMENT,
      [
        row.id,
        tenantId,
        row.name,
        'github',
        row.source_config,
        row.source_revision_config,
        row.secrets,
        row.status,
        row.revision_id,
        row.deployment_type,
        row.integration_id,
        row.repo_url_key,
        row.repo_ref,
        row.build_on_push,
        row.now,
      ],
    ],
    // The runner the server's create named (its process lease, locked FOR KEY SHARE as the server's create locks it).
    [INSERT_REVISION, [row.revision_id, row.id, tenantId, revision.status, 'github', row.revision_config, row.secrets, row.now, revision.runner_id]],
    [ADOPT_OR_INSERT_TRACING_PROJECT, [newRowId(), tenantId, row.name, row.id, row.now]],
    [INSERT_LOG, [row.revision_id, log.type, log.level, log.message, row.now]],
    [
      INSERT_AUDIT,
      [
        randomUUID(),
        audit.organization_id,
        audit.workspace_id,
        audit.actor_kind,
        audit.actor_id,
        audit.actor_scope,
        audit.address,
        audit.user_agent,
        audit.action,
        audit.resource_type,
        row.id,
        audit.route,
        audit.fields,
        audit.outcome,
        audit.status,
        randomUUID(),
        row.now,
      ],
    ],
  ];
}

/** The writes in one transaction: BEGIN … COMMIT on one pooled connection, or one pipeline. */
async function writeCreate(row) {
  const writes = createWrites(row);
  const client = await pool.connect();
  try {
    if (pipelined) {
      const pipeline = new pipelined(
        writes.map(([text, values]) => ({ text, values })),
        types,
      );
      client.query(pipeline);
      await pipeline.done;
      return;
    }
    await client.query('BEGIN');
    try {
      for (const [text, values] of writes) await client.query(text, values);
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    }
  } finally {
    client.release();
  }
}

async function getRevision(res, deploymentId, revisionId) {
  const row = (await pool.query(READ_REVISION, [revisionId, deploymentId, tenantId])).rows[0];
  if (!row) return send(res, 404, '{"detail":"not found"}');
  // The answer's fields in the server's order (publicRevision).
  const text = revisionAnswerText(row);
  send(res, 200, text, { etag: `"${row.id}.${row.version}"` });
}

async function createDeployment(res, body) {
  let input;
  try {
    input = JSON.parse(body);
  } catch {
    return send(res, 422, '{"detail":"invalid JSON"}');
  }
  const integration = (await pool.query(READ_INTEGRATION, [input.source_config?.integration_id, tenantId])).rows[0];
  if (!integration) return send(res, 400, '{"detail":"unknown integration"}');
  const now = new Date().toISOString();
  const { sourceConfig, revisionConfig, repoUrlKey } = createConfigs(input);
  const row = {
    id: newRowId(),
    revision_id: newRowId(),
    name: input.name,
    source_config: JSON.stringify(sourceConfig),
    source_revision_config: JSON.stringify(revisionConfig),
    revision_config: JSON.stringify(revisionConfig),
    secrets: seal(input.secrets ?? []),
    status: 'AWAITING_DATABASE',
    deployment_type: sourceConfig.deployment_type,
    integration_id: integration.id,
    repo_url_key: repoUrlKey,
    repo_ref: revisionConfig.repo_ref,
    build_on_push: sourceConfig.build_on_push ? 1 : 0,
    now,
  };
  try {
    await writeCreate(row);
  } catch (error) {
    return send(res, error.code === '23505' ? 409 : 500, JSON.stringify({ detail: String(error.message) }));
  }
  send(
    res,
    201,
    deploymentAnswerText({ id: row.id, tenantId, name: row.name, sourceConfig, revisionConfig, status: row.status, revisionId: row.revision_id, now }),
  );
}

const server = createServer((req, res) => {
  const fail = (error) => send(res, 500, JSON.stringify({ detail: String(error?.message ?? error) }));
  const match = req.method === 'GET' ? REVISION_PATH.exec(req.url ?? '') : null;
  if (match) return void getRevision(res, match[1], match[2]).catch(fail);
  if (req.method === 'POST' && req.url === '/v2/deployments') {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => void createDeployment(res, Buffer.concat(chunks).toString('utf8')).catch(fail));
    return;
  }
  send(res, 404, '{"detail":"not found"}');
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stderr.write(`${JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => server.close(() => pool.end().then(() => process.exit(0))));
