import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync } from 'node:fs';
import Database from 'better-sqlite3';

type Row = Record<string, unknown>;

/**
 * Fills a migrated control-plane database with `deployments` deployments of `revisionsEach`
 * revisions each (all ended DEPLOYED), plus one tracing project per deployment, by copying the
 * rows of one deployment that was created through the API (`templateId`): its secrets columns are
 * real SecretBox ciphertext, so every copy reads back through the API like the original.
 * Run it while the server is stopped. Answers the ids of a sample of deployments and revisions
 * spread across the table, for the GET scenarios.
 */
export function seedDatabase(
  path: string,
  options: {
    templateId: string;
    deployments: number;
    revisionsEach: number;
    sample: number;
    /** Column values for deployment `i` over the template's (e.g. `build_on_push`, `repo_url_key`, `repo_ref`, `source_config` for the webhook scenario). */
    customize?: (i: number) => Row;
    /** Deployment `i`'s name (`seed-<i>` unless said), so that a database can be seeded more than once. */
    name?: (i: number) => string;
  },
): { deploymentIds: string[]; revisions: Array<{ deploymentId: string; revisionId: string }> } {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  // The seed is thrown away if the machine crashes; no need to wait for the disk on each page.
  db.pragma('synchronous = OFF');
  const deployment = db.prepare('SELECT * FROM deployments WHERE id = ?').get(options.templateId) as Row;
  const revision = db.prepare('SELECT * FROM revisions WHERE deployment_id = ? ORDER BY seq LIMIT 1').get(options.templateId) as Row;
  const project = db.prepare('SELECT * FROM tracing_projects WHERE deployment_id = ?').get(options.templateId) as Row;
  if (!deployment || !revision || !project) throw new Error('template deployment not found');

  const insertDeployment = db.prepare(
    `INSERT INTO deployments (id, tenant_id, name, source, source_config, source_revision_config, secrets, status, latest_revision_id,
       active_revision_id, image_version, deployment_type, integration_id, listener_id, repo_url_key, repo_ref, build_on_push,
       delete_tracing_project, created_at, updated_at)
     VALUES (@id, @tenant_id, @name, @source, @source_config, @source_revision_config, @secrets, 'READY', @latest, @latest,
       @image_version, @deployment_type, @integration_id, @listener_id, @repo_url_key, @repo_ref, @build_on_push, 0, @created_at, @created_at)`,
  );
  const insertRevision = db.prepare(
    `INSERT INTO revisions (id, deployment_id, tenant_id, status, status_message, source, source_revision_config, secrets, resource_spec,
       trigger, version, created_at, updated_at)
     VALUES (?, ?, ?, 'DEPLOYED', NULL, ?, ?, ?, ?, ?, 6, ?, ?)`,
  );
  const insertProject = db.prepare('INSERT INTO tracing_projects (id, tenant_id, name, deployment_id, created_at) VALUES (?, ?, ?, ?, ?)');

  const sampleEvery = Math.max(1, Math.floor(options.deployments / options.sample));
  const deploymentIds: string[] = [];
  const revisions: Array<{ deploymentId: string; revisionId: string }> = [];
  // Older than the template, one millisecond apart, so the list's order is the insertion order.
  const start = Date.parse(deployment.created_at as string) - options.deployments * 1000;
  const batch = db.transaction((from: number, to: number) => {
    for (let i = from; i < to; i += 1) {
      const id = crypto.randomUUID();
      const createdAt = new Date(start + i * 1000).toISOString();
      const revisionIds: string[] = [];
      for (let r = 0; r < options.revisionsEach; r += 1) revisionIds.push(crypto.randomUUID());
      const latest = revisionIds[revisionIds.length - 1] ?? null;
      insertDeployment.run({ ...deployment, ...options.customize?.(i), id, name: options.name?.(i) ?? `seed-${i}`, latest, created_at: createdAt });
      for (const revisionId of revisionIds) {
        insertRevision.run(
          revisionId,
          id,
          deployment.tenant_id,
          revision.source,
          revision.source_revision_config,
          revision.secrets,
          revision.resource_spec,
          r0(revisionIds, revisionId),
          createdAt,
          createdAt,
        );
      }
      insertProject.run(crypto.randomUUID(), deployment.tenant_id, options.name?.(i) ?? `seed-${i}`, id, createdAt);
      if (i % sampleEvery === 0 && latest) {
        deploymentIds.push(id);
        revisions.push({ deploymentId: id, revisionId: revisionIds[Math.floor(revisionIds.length / 2)]! });
      }
    }
  });
  const chunk = 5000;
  for (let from = 0; from < options.deployments; from += chunk) batch(from, Math.min(options.deployments, from + chunk));
  closeSeed(db);
  return { deploymentIds, revisions };
}

/**
 * Ends a seed: its WAL checkpointed into the file, the connection closed, the file flushed. The
 * seeds write with synchronous=OFF, so their pages are still the kernel's to write when they
 * close; flushed here, before the server starts, because otherwise the server's first checkpoint
 * (its first fsync of the database file, some 1,000 WAL pages after it starts) waits for all of
 * them: 24 ms under strace, in the middle of whatever request the benchmark is timing then (nearly
 * always the webhook scenario's third measured delivery, 40–60 ms, when it was not flushed here;
 * later checkpoints' fsyncs take 1–2 ms).
 */
function closeSeed(db: Database.Database): void {
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  const fd = openSync(db.name, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** The first revision of a deployment was made by the create, the later ones by patches. */
function r0(ids: string[], id: string): string {
  return ids[0] === id ? 'create' : 'patch';
}

/** SQLite's plan for a statement, one line per step, to show that a query uses an index. */
export function queryPlan(path: string, sql: string, params: Row): string {
  const db = new Database(path, { readonly: true });
  try {
    const rows = db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as Array<{ detail: string }>;
    return rows.map((r) => r.detail).join('; ');
  } finally {
    db.close();
  }
}

/**
 * Gives deployment `deploymentId` `count` past push revisions, older than its existing ones (as if
 * it had been pushed to `count` times before): distinct commits, every one ended (DEPLOYED or
 * SKIPPED, alternately), copies of its first revision otherwise (real SecretBox ciphertext).
 * Fills every commit column the schema has, so the seed stays right when the commit gets a column
 * of its own. Run it while the server is stopped.
 */
export function seedRevisionHistory(path: string, deploymentId: string, count: number): void {
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const first = db.prepare('SELECT * FROM revisions WHERE deployment_id = ? ORDER BY seq LIMIT 1').get(deploymentId) as Row | undefined;
  if (!first) throw new Error(`deployment ${deploymentId} has no revision to copy`);
  const columns = (db.prepare('PRAGMA table_info(revisions)').all() as Array<{ name: string }>).map((c) => c.name).filter((name) => name !== 'seq');
  const insert = db.prepare(`INSERT INTO revisions (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`);
  const start = Date.parse(first.created_at as string) - count * 1000;
  db.transaction(() => {
    for (let i = 0; i < count; i += 1) {
      const sha = randomBytes(20).toString('hex');
      const at = new Date(start + i * 1000).toISOString();
      const config = { ...(JSON.parse(first.source_revision_config as string) as Record<string, unknown>), repo_commit_sha: sha };
      const { seq: _seq, ...copy } = first;
      const row: Row = {
        ...copy,
        id: crypto.randomUUID(),
        status: i % 2 ? 'DEPLOYED' : 'SKIPPED',
        trigger: 'push',
        source_revision_config: JSON.stringify(config),
        created_at: at,
        updated_at: at,
      };
      for (const column of columns) if (/commit_sha$/.test(column)) row[column] = sha;
      insert.run(row);
    }
  })();
  closeSeed(db);
}
