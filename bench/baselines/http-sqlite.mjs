// Baseline 2: bare node:http + better-sqlite3 doing what the control plane's two hot paths do in
// SQL, with none of its framework: the floor for a JSON API on one SQLite file. Plain JavaScript
// (no TypeScript stripper loaded).
//
// It opens a copy of the real server's database (`BASELINE_DB`, made by the benchmark after the
// server created its deployments), so it reads the same rows through the same statements:
// - `GET /v2/deployments/:id/revisions/:rid` runs the store's revision read
//   (`SELECT <the record's columns> FROM revisions WHERE id = ? AND deployment_id = ? AND tenant_id = ?`,
//   the columns given by the benchmark from the server's own list, BASELINE_REVISION_COLUMNS) and answers
//   the same bytes as the server (the benchmark checks this at start) with the same ETag;
// - `POST /v2/deployments` reads the JSON body, looks up the integration
//   (`SELECT * FROM github_integrations WHERE id = ? AND tenant_id = ?`) and writes the same
//   three rows in one transaction as the server's create (deployment, first revision, tracing
//   project), secrets sealed with AES-256-GCM as the server stores them.
// No API key check, no validation beyond JSON: that is the framework cost being measured.
// With BASELINE_GROUP_COMMIT=1 the creates asked for in one turn of the event loop share one
// transaction, answered once it commits, with no savepoint per create unless one of them fails
// (then the group is rolled back and run again, each create in a savepoint of its own): what the
// server's SQLite store does (server/store/group-commit.ts, since hot-paths-round-9-create.md), so
// the POST comparison stays like for like.
// With BASELINE_SAME_ROWS=1 a create writes every row the server's create writes, row for row
// (docs/decisions/hot-paths-round-5-create.md): its revision already past the sandbox's first step
// (BUILDING, naming its runner) with that step's log line, and the request's audit entry, in the
// same transaction; the database being a copy of the server's, the same indexes and triggers (the
// outgoing events', the GitHub status outbox's) run on both. What it still does not do is the
// server's own work beyond those rows: its reads (the key, the listener that decides the data
// plane), the runner's lease check, the tracing project's adoption, validation.
// With BASELINE_IDS=time-ordered a create's deployment, revision and tracing project get the
// server's time-ordered ids (server/lib/time-ordered-id.ts: consecutive creates' index entries on the
// same last pages) instead of random ones (api-shapes.mjs, newRowId); bench/lib/sqlite-baseline.ts
// asks for it, so the create comparisons write the same keys (docs/decisions/time-ordered-ids.md).
// Experiment only (bench/cpu-per-request.ts --carry=…; unset, the baseline is the plain one above):
// BASELINE_CARRY=server also starts the whole control-plane server (its bundle, server/dist) in this
// process on a database of its own, idle: its code, heap, timers and intervals beside the bare
// server, which alone answers the benchmark's requests: does a larger process make the same bare
// code cost more? BASELINE_CARRY=code imports the bundle's library chunks without starting
// anything (code loaded, little heap, no timers).
// Settings: BASELINE_REVISION_COLUMNS (the server's REVISION_RECORD_COLUMNS; * when unset), BASELINE_DB, BASELINE_TENANT_ID, BASELINE_SYNCHRONOUS (FULL), BASELINE_ENCRYPTION_KEY (base64, 32 bytes), BASELINE_GROUP_COMMIT, BASELINE_SAME_ROWS, BASELINE_IDS (random | time-ordered).

import { createSecretKey, randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import Database from 'better-sqlite3';
import { createConfigs, deploymentAnswerText, newRowId, REVISION_PATH, revisionAnswerText, sealer, send } from './api-shapes.mjs';

await carry(process.env.BASELINE_CARRY);

/** The experiment's passenger (see BASELINE_CARRY above); nothing when unset. */
async function carry(what) {
  if (!what) return;
  const { readdirSync } = await import('node:fs');
  const { dirname, join } = await import('node:path');
  const dist = new URL('../../server/dist/', import.meta.url);
  if (what === 'code') {
    // Every chunk but the server's own (main-*.js starts it when evaluated) and its entry.
    for (const file of readdirSync(dist)
      .filter((f) => f.endsWith('.js') && !f.startsWith('main'))
      .sort())
      await import(new URL(file, dist).href);
    return;
  }
  if (what !== 'server') throw new Error(`BASELINE_CARRY: ${what}?`);
  const env = process.env;
  Object.assign(env, {
    // Beside the baseline's copy, in the benchmark's temporary folder (removed with it).
    DATABASE_URL: join(dirname(env.BASELINE_DB), 'carried.db'),
    ENCRYPTION_KEY: env.BASELINE_ENCRYPTION_KEY,
    BOOTSTRAP_API_KEY: `carried-${randomUUID()}`,
    // Quiet: its "listening" line must not be taken for this server's.
    LOG_LEVEL: 'error',
    SANDBOX_STAGE_MS: '3600000',
  });
  await import(new URL('main.js', dist).href);
}

const db = new Database(process.env.BASELINE_DB);
db.pragma('journal_mode = WAL');
db.pragma(`synchronous = ${process.env.BASELINE_SYNCHRONOUS ?? 'FULL'}`);
db.pragma('busy_timeout = 5000');
db.pragma('foreign_keys = ON');
// The server's own (server/store/sqlite.ts): a 16 MB page cache, and temporary journals in memory
// (without it a savepoint's or a statement's journal spills to a temporary file: hot-paths-round-9-create.md).
db.pragma('cache_size = -16000');
db.pragma('temp_store = MEMORY');
const tenantId = process.env.BASELINE_TENANT_ID;
const key = createSecretKey(Buffer.from(process.env.BASELINE_ENCRYPTION_KEY ?? randomBytes(32).toString('base64'), 'base64'));

const readRevision = db.prepare(`SELECT ${process.env.BASELINE_REVISION_COLUMNS ?? '*'} FROM revisions WHERE id = ? AND deployment_id = ? AND tenant_id = ?`);
const readIntegration = db.prepare('SELECT * FROM github_integrations WHERE id = ? AND tenant_id = ?');
const insertDeployment = db.prepare(
  `INSERT INTO deployments (id, tenant_id, name, source, source_config, source_revision_config, secrets, status,
     latest_revision_id, active_revision_id, image_version, deployment_type, integration_id, listener_id,
     repo_url_key, repo_ref, build_on_push, created_at, updated_at)
   VALUES (@id, @tenant_id, @name, @source, @source_config, @source_revision_config, @secrets, @status,
     @latest_revision_id, NULL, NULL, @deployment_type, @integration_id, NULL,
     @repo_url_key, @repo_ref, @build_on_push, @now, @now)`,
);
const insertRevision = db.prepare(
  `INSERT INTO revisions (id, deployment_id, tenant_id, status, status_message, source, source_revision_config, secrets, resource_spec, trigger, created_at, updated_at)
   VALUES (@id, @deployment_id, @tenant_id, @status, NULL, @source, @source_revision_config, @secrets, NULL, 'create', @now, @now)`,
);
const insertTracingProject = db.prepare('INSERT INTO tracing_projects (id, tenant_id, name, deployment_id, created_at) VALUES (?, ?, ?, ?, ?)');
const sameRows = process.env.BASELINE_SAME_ROWS === '1';
// The audit entry's field list as the server makes it; loaded only for the row-for-row mode, so the
// plain baseline stays plain JavaScript (no TypeScript stripper in its memory or start).
const auditFieldPaths = sameRows ? (await import('../../server/lib/request-scope.ts')).auditFieldPaths : null;
const rowForRow = sameRows ? rowForRowStatements() : null;
/** A create's rows, in whatever transaction is open (the group's), or in `createNow`'s own. */
const createRows = (row) => {
  insertDeployment.run(row);
  if (rowForRow) rowForRow.revisionAndLog(row);
  else insertRevision.run({ ...row, id: row.latest_revision_id, deployment_id: row.id, status: 'AWAITING_BUILD' });
  insertTracingProject.run(newRowId(), row.tenant_id, row.name, row.id, row.now);
  rowForRow?.audit(row);
};
const createNow = db.transaction(createRows);

/**
 * The rows the server's create writes beyond the three: its revision as the sandbox's first step
 * leaves it (BUILDING, its runner named: this process), that step's log line, and the audit entry
 * of the request (organization and key as the server's, read once here: the server has them from
 * its cached key check).
 */
function rowForRowStatements() {
  const runner = randomUUID();
  const { organization_id: organizationId } = db.prepare('SELECT organization_id FROM workspaces WHERE id = ?').get(tenantId);
  const { id: keyId } = db.prepare('SELECT id FROM api_keys ORDER BY rowid LIMIT 1').get();
  const revision = db.prepare(
    `INSERT INTO revisions (id, deployment_id, tenant_id, status, status_message, source, source_revision_config, secrets, resource_spec, trigger, created_at, updated_at, runner_id)
     VALUES (@id, @deployment_id, @tenant_id, 'BUILDING', NULL, @source, @source_revision_config, @secrets, NULL, 'create', @now, @now, @runner)`,
  );
  const log = db.prepare('INSERT INTO revision_logs (revision_id, type, level, message, timestamp) VALUES (?, ?, ?, ?, ?)');
  const audit = db.prepare(
    `INSERT INTO audit_events (id, organization_id, workspace_id, actor_kind, actor_id, actor_scope, address, user_agent,
       action, resource_type, resource_id, route, fields, outcome, status, request_id, created_at)
     VALUES (?, ?, ?, 'api_key', ?, 'organization', ?, ?, 'create', 'deployment', ?, 'POST /v2/deployments', ?, 'succeeded', NULL, ?, ?)`,
  );
  return {
    revisionAndLog(row) {
      revision.run({ ...row, id: row.latest_revision_id, deployment_id: row.id, runner });
      const config = JSON.parse(row.source_revision_config);
      const repoUrl = JSON.parse(row.source_config).repo_url;
      const message = `sandbox: simulated build of ${repoUrl}@${config.repo_ref} (${config.graph_config_path}); nothing is cloned or built`;
      log.run(row.latest_revision_id, 'build', 'info', message, row.now);
    },
    audit(row) {
      audit.run(randomUUID(), organizationId, tenantId, keyId, row.address, row.userAgent, row.id, JSON.stringify(row.fields), randomUUID(), row.now);
    },
  };
}

/** Creates waiting for the next grouped commit: [row, done(error)]. */
let pending = [];
/** Thrown to roll the group's transaction back when one create fails: the group is then run one savepoint per create. */
class RedoOneByOne extends Error {}
/** The group in one transaction with nothing per create (the usual case: no create fails). */
const commitTogether = db.transaction((group) => {
  for (const entry of group) {
    try {
      createRows(entry.row);
    } catch (error) {
      if (!db.inTransaction) throw error;
      throw new RedoOneByOne();
    }
  }
});
/** The group again, each create in a savepoint of its own (`createNow` nested), each keeping its own outcome. */
const commitOneByOne = db.transaction((group) => {
  for (const entry of group) {
    try {
      createNow(entry.row);
    } catch (error) {
      if (!db.inTransaction) throw error;
      entry.error = error;
    }
  }
});
const commitGroup = (group) => {
  try {
    commitTogether(group);
  } catch (error) {
    if (!(error instanceof RedoOneByOne)) throw error;
    commitOneByOne(group);
  }
};
/** Calls `done(error)` once the row is committed (or refused). */
function create(row, done) {
  if (process.env.BASELINE_GROUP_COMMIT !== '1') {
    try {
      createNow(row);
    } catch (error) {
      return done(error);
    }
    return done(null);
  }
  pending.push({ row, done, error: null });
  if (pending.length > 1) return;
  setImmediate(() => {
    const group = pending;
    pending = [];
    try {
      commitGroup(group);
    } catch (error) {
      for (const entry of group) entry.done(error);
      return;
    }
    for (const entry of group) entry.done(entry.error);
  });
}

const seal = sealer(key);

const server = createServer((req, res) => {
  const match = req.method === 'GET' ? REVISION_PATH.exec(req.url ?? '') : null;
  if (match) {
    const row = readRevision.get(match[2], match[1], tenantId);
    if (!row) return send(res, 404, '{"detail":"not found"}');
    // The answer's fields in the server's order (publicRevision), so the bytes are the same.
    const text = revisionAnswerText(row);
    return send(res, 200, text, { etag: `"${row.id}.${row.version}"` });
  }
  if (req.method === 'POST' && req.url === '/v2/deployments') {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      let input;
      try {
        input = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return send(res, 422, '{"detail":"invalid JSON"}');
      }
      const integration = readIntegration.get(input.source_config?.integration_id, tenantId);
      if (!integration) return send(res, 400, '{"detail":"unknown integration"}');
      const now = new Date().toISOString();
      const { sourceConfig, revisionConfig, repoUrlKey } = createConfigs(input);
      const secrets = seal(input.secrets ?? []);
      const row = {
        id: newRowId(),
        tenant_id: tenantId,
        name: input.name,
        source: 'github',
        source_config: JSON.stringify(sourceConfig),
        source_revision_config: JSON.stringify(revisionConfig),
        secrets,
        status: 'AWAITING_DATABASE',
        latest_revision_id: newRowId(),
        deployment_type: sourceConfig.deployment_type,
        integration_id: integration.id,
        repo_url_key: repoUrlKey,
        repo_ref: revisionConfig.repo_ref,
        build_on_push: sourceConfig.build_on_push ? 1 : 0,
        now,
        ...(sameRows ? { address: req.socket.remoteAddress ?? null, userAgent: req.headers['user-agent'] ?? null, fields: auditFieldPaths(input) } : {}),
      };
      create(row, (error) => {
        if (error) return send(res, 409, JSON.stringify({ detail: String(error.message) }));
        send(
          res,
          201,
          deploymentAnswerText({
            id: row.id,
            tenantId,
            name: row.name,
            sourceConfig,
            revisionConfig,
            status: row.status,
            revisionId: row.latest_revision_id,
            now,
          }),
        );
      });
    });
    return;
  }
  send(res, 404, '{"detail":"not found"}');
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stderr.write(`${JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
