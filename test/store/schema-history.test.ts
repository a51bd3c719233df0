import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, inject, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { DOMAIN_STORE_RULES } from '../../server/domain/store-rules.ts';
import { MIGRATIONS } from '../../server/store/migrations/index.ts';
import { openStore } from '../../server/store/open.ts';
import { migrate, PgDb } from '../../server/store/postgres/db.ts';
import { createTestDatabase } from '../helpers/postgres.ts';

/**
 * The one schema history (server/store/migrations/): both databases it makes hold the same tables,
 * columns, keys, indexes and triggers, and a database made by either released history (SQLite
 * 1–13, PostgreSQL's former 1–6, test/fixtures/released-schemas/), whole or part-way, upgrades in
 * place with its rows.
 */

type Column = { name: string; type: string; notNull: boolean; default: string | null };
type Index = { table: string; name: string; columns: string[]; unique: boolean; partial: boolean };
type Schema = {
  tables: Record<string, { columns: Column[]; primaryKey: string[]; unique: string[][]; foreignKeys: string[] }>;
  indexes: Index[];
  triggers: string[];
};

/** Types as the two databases name the same storage: TEXT, a 64-bit-capable integer, bytes. */
function normalType(type: string): string {
  const t = type.toLowerCase();
  if (t === 'text') return 'text';
  if (t === 'integer' || t === 'bigint' || t === 'int4' || t === 'int8') return 'integer';
  if (t === 'blob' || t === 'bytea') return 'bytes';
  return t;
}
const normalDefault = (value: string | null) => (value === null ? null : value.replace(/::\w+$/, '').replace(/^'(.*)'$/, '$1'));
const ON_DELETE: Record<string, string> = { a: 'NO ACTION', c: 'CASCADE', n: 'SET NULL', r: 'RESTRICT', d: 'SET DEFAULT' };
const sorted = <T>(list: T[], key: (item: T) => string) => [...list].sort((a, b) => key(a).localeCompare(key(b)));

function sqliteSchema(db: Database.Database): Schema {
  const tables: Schema['tables'] = {};
  const names = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as Array<{ name: string }>;
  for (const { name } of names) {
    const info = db.prepare('SELECT * FROM pragma_table_info(?)').all(name) as Array<{
      name: string;
      type: string;
      notnull: number;
      dflt_value: string | null;
      pk: number;
    }>;
    const indexList = db.prepare('SELECT * FROM pragma_index_list(?)').all(name) as Array<{ name: string; origin: string }>;
    const indexColumns = (index: string) =>
      (db.prepare('SELECT name FROM pragma_index_info(?) ORDER BY seqno').all(index) as Array<{ name: string }>).map((c) => c.name);
    const fks = db.prepare('SELECT * FROM pragma_foreign_key_list(?)').all(name) as Array<{ from: string; table: string; to: string; on_delete: string }>;
    tables[name] = {
      columns: sorted(
        info.map((c) => ({ name: c.name, type: normalType(c.type), notNull: c.notnull === 1 || c.pk > 0, default: normalDefault(c.dflt_value) })),
        (c) => c.name,
      ),
      primaryKey: info
        .filter((c) => c.pk > 0)
        .sort((a, b) => a.pk - b.pk)
        .map((c) => c.name),
      unique: indexList
        .filter((i) => i.origin === 'u')
        .map((i) => indexColumns(i.name))
        .sort(),
      foreignKeys: fks.map((f) => `${f.from} -> ${f.table}(${f.to}) ON DELETE ${f.on_delete}`).sort(),
    };
  }
  const indexRows = db.prepare("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL").all() as Array<{
    name: string;
    tbl_name: string;
    sql: string;
  }>;
  const indexes = indexRows.map((i) => ({
    table: i.tbl_name,
    name: i.name,
    columns: (db.prepare('SELECT name FROM pragma_index_info(?) ORDER BY seqno').all(i.name) as Array<{ name: string }>).map((c) => c.name),
    unique: /^CREATE UNIQUE/i.test(i.sql),
    partial: /\bWHERE\b/i.test(i.sql),
  }));
  const triggers = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger'").all() as Array<{ name: string }>).map((t) => t.name).sort();
  return { tables, indexes: sorted(indexes, (i) => i.name), triggers };
}

async function postgresSchema(db: PgDb): Promise<Schema> {
  const tables: Schema['tables'] = {};
  const names = await db.rows<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1",
  );
  for (const { name } of names) {
    const columns = await db.rows<{ name: string; type: string; nullable: string; def: string | null }>(
      `SELECT column_name AS name, udt_name AS type, is_nullable AS nullable, column_default AS def FROM information_schema.columns
       WHERE table_schema = current_schema() AND table_name = ? AND column_name <> 'rowid'`,
      [name],
    );
    const constraints = await db.rows<{ type: string; columns: string[]; target: string | null; target_columns: string[] | null; on_delete: string }>(
      `SELECT c.contype AS type,
         array(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i)::text[] AS columns,
         f.relname AS target,
         array(SELECT a.attname FROM unnest(c.confkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n ORDER BY k.i)::text[] AS target_columns,
         c.confdeltype AS on_delete
       FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid LEFT JOIN pg_class f ON f.oid = c.confrelid
       WHERE t.relname = ? AND t.relnamespace = current_schema()::regnamespace`,
      [name],
    );
    tables[name] = {
      columns: sorted(
        columns.map((c) => ({ name: c.name, type: normalType(c.type), notNull: c.nullable === 'NO', default: normalDefault(c.def) })),
        (c) => c.name,
      ),
      primaryKey: constraints.find((c) => c.type === 'p')?.columns ?? [],
      unique: constraints
        .filter((c) => c.type === 'u')
        .map((c) => c.columns)
        .sort(),
      foreignKeys: constraints
        .filter((c) => c.type === 'f')
        .map((c) => `${c.columns.join(',')} -> ${c.target}(${c.target_columns!.join(',')}) ON DELETE ${ON_DELETE[c.on_delete]}`)
        .sort(),
    };
  }
  const indexes = await db.rows<Index>(
    `SELECT t.relname AS table, i.relname AS name, ix.indisunique AS unique, ix.indpred IS NOT NULL AS partial,
       array(SELECT a.attname FROM unnest(ix.indkey) WITH ORDINALITY k(n, o) JOIN pg_attribute a ON a.attrelid = ix.indrelid AND a.attnum = k.n ORDER BY k.o)::text[] AS columns
     FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class t ON t.oid = ix.indrelid
     WHERE t.relnamespace = current_schema()::regnamespace AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid)`,
  );
  const triggers = (
    await db.rows<{ name: string }>(
      'SELECT tgname AS name FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE NOT t.tgisinternal AND c.relnamespace = current_schema()::regnamespace',
    )
  )
    .map((t) => t.name)
    .sort();
  return {
    tables,
    indexes: sorted(
      indexes.map((i) => ({ table: i.table, name: i.name, columns: i.columns, unique: i.unique, partial: i.partial })),
      (i) => i.name,
    ),
    triggers,
  };
}

function freshSqlite(): Database.Database {
  const path = join(mkdtempSync(join(tmpdir(), 'cp-schema-')), 'control-plane.db');
  return new Database(path);
}

/** The released migrations of a fixture up to `last`, as [version, sql]. */
function released(file: string, last: number): Array<[number, string]> {
  const parts = readFileSync(`test/fixtures/released-schemas/${file}`, 'utf8').split(/^-- migration (\d+) \w+$/m);
  const out: Array<[number, string]> = [];
  for (let i = 1; i < parts.length; i += 2) if (Number(parts[i]) <= last) out.push([Number(parts[i]), parts[i + 1]!]);
  expect(out.length).toBe(last);
  return out;
}

/** An SQLite file as the released history left it at `last`: its migrations run in order and recorded. */
function releasedSqlite(last = 13): string {
  const path = join(mkdtempSync(join(tmpdir(), 'cp-released-')), 'control-plane.db');
  const db = new Database(path);
  db.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  for (const [version, sql] of released('sqlite-13.sql', last)) {
    db.exec(sql);
    db.prepare("INSERT INTO schema_migrations VALUES (?, 'released', '2026-11-25T00:00:00.000Z')").run(version);
  }
  return closeAfter(db, path);
}

/** A PostgreSQL database as its former history left it at `last`. */
async function releasedPostgres(last = 6): Promise<string> {
  const url = await createTestDatabase(inject('postgresAdminUrl'));
  const raw = new PgDb(url, { max: 2 });
  try {
    await raw.run('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    for (const [version, sql] of released('postgres-6.sql', last)) {
      await raw.pool.query(sql);
      await raw.run("INSERT INTO schema_migrations VALUES (?, 'released', '2026-11-25T00:00:00.000Z')", [version]);
    }
    for (const statement of SEED) await raw.run(statement);
  } finally {
    await raw.close();
  }
  return url;
}

function closeAfter(db: Database.Database, path: string): string {
  db.close();
  return path;
}

/** A workspace with a deployment, its revision and log line, a webhook delivery and an upload chunk, in the released tables. */
const SEED = [
  "INSERT INTO organizations (id, name, created_at) VALUES ('org', 'default', '2026-11-25T00:00:00.000Z')",
  "INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES ('ws', 'org', 'default', 1, '2026-11-25T00:00:00.000Z')",
  `INSERT INTO listeners (id, tenant_id, compute_type, compute_id, compute_config, created_at, updated_at)
     VALUES ('sandbox', 'ws', 'sandbox', 'sandbox', '{"k8s_namespaces":[]}', '2026-11-25T00:00:00.000Z', '2026-11-25T00:00:00.000Z')`,
  `INSERT INTO deployments (id, tenant_id, name, source, source_config, source_revision_config, secrets, status, latest_revision_id, created_at, updated_at)
     VALUES ('dep', 'ws', 'kept', 'external_docker', '{"listener_id":null,"resource_spec":null}', '{"repo_ref":null}', 'SECRETS', 'READY', 'rev', '2026-11-25T00:00:00.000Z', '2026-11-25T00:00:00.000Z')`,
  `INSERT INTO revisions (id, deployment_id, tenant_id, status, source, source_revision_config, secrets, trigger, created_at, updated_at)
     VALUES ('rev', 'dep', 'ws', 'DEPLOYED', 'external_docker', '{"repo_ref":null}', 'SECRETS', 'create', '2026-11-25T00:00:00.000Z', '2026-11-25T00:00:00.000Z')`,
  "INSERT INTO revision_logs (revision_id, type, level, message, timestamp) VALUES ('rev', 'deploy', 'info', 'kept line', '2026-11-25T00:00:00.000Z')",
  `INSERT INTO webhook_deliveries (delivery_id, event, status, received_at, workspace_id) VALUES ('delivery-1', 'ping', 'processed', '2026-11-25T00:00:00.000Z', 'ws')`,
  "INSERT INTO webhook_delivery_tenants (delivery_id, tenant_id) VALUES ('delivery-1', 'ws')",
];

describe('one schema history on both databases', () => {
  it('makes the same tables, columns, keys, indexes and triggers on SQLite and on PostgreSQL', async () => {
    const sqlite = freshSqlite();
    const path = sqlite.name;
    sqlite.close();
    const store = await openStore(path, { secretBox: new SecretBox(randomBytes(32)), synchronous: 'NORMAL' });
    await store.close();
    const pg = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 2 });
    try {
      await migrate(pg);
      const onSqlite = sqliteSchema(new Database(path, { readonly: true }));
      const onPostgres = await postgresSchema(pg);
      // The comparison must have something to compare: every table of the baseline is there.
      expect(Object.keys(onSqlite.tables)).toContain('revisions');
      expect(onSqlite.indexes.map((i) => i.name)).toContain('revisions_one_push_per_commit');
      expect(onPostgres).toEqual(onSqlite);
    } finally {
      await pg.close();
    }
  });

  it('an SQLite file made by the released history (1–13) upgrades in place: its rows are kept and its schema is the fresh one', async () => {
    const path = releasedSqlite();
    const raw = new Database(path);
    for (const statement of SEED) raw.exec(statement);
    raw.close();
    const box = new SecretBox(randomBytes(32));
    const backend = await openStore(path, { secretBox: box, synchronous: 'NORMAL', rules: DOMAIN_STORE_RULES });
    try {
      const revision = await backend.core.getRevision('ws', 'dep', 'rev');
      expect(revision).toMatchObject({ id: 'rev', status: 'DEPLOYED', deployment_id: 'dep' });
      expect((await backend.core.readLogs('rev', 'deploy', 0, 10)).logs.map((l) => l.message)).toEqual(['kept line']);
      expect((await backend.webhooks.listForTenant('ws', { limit: 10, offset: 0 } as never)).resources.map((d) => d.delivery_id)).toEqual(['delivery-1']);
      expect((await backend.core.getDefaultWorkspace('org'))?.id).toBe('ws');
    } finally {
      await backend.close();
    }
    const upgraded = new Database(path, { readonly: true });
    const fresh = freshSqlite();
    const freshPath = fresh.name;
    fresh.close();
    await (await openStore(freshPath, { secretBox: box, synchronous: 'NORMAL' })).close();
    expect(sqliteSchema(upgraded)).toEqual(sqliteSchema(new Database(freshPath, { readonly: true })));
    const versions = (upgraded.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as Array<{ version: number }>).map((r) => r.version);
    expect(versions).toEqual(MIGRATIONS.map((m) => m.version));
  });

  it('a PostgreSQL database made by the released history (1–6) upgrades in place: its rows are kept and its schema is the fresh one', async () => {
    const url = await releasedPostgres();
    const backend = await openStore(url, { secretBox: new SecretBox(randomBytes(32)), rules: DOMAIN_STORE_RULES });
    try {
      expect(await backend.core.getRevision('ws', 'dep', 'rev')).toMatchObject({ id: 'rev', status: 'DEPLOYED' });
      expect((await backend.core.readLogs('rev', 'deploy', 0, 10)).logs.map((l) => l.message)).toEqual(['kept line']);
      expect((await backend.webhooks.listForTenant('ws', { limit: 10, offset: 0 } as never)).resources.map((d) => d.delivery_id)).toEqual(['delivery-1']);
    } finally {
      await backend.close();
    }
    const upgraded = new PgDb(url, { max: 2 });
    const fresh = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 2 });
    try {
      await migrate(fresh);
      expect(await postgresSchema(upgraded)).toEqual(await postgresSchema(fresh));
      const versions = (await upgraded.rows<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).map((r) => r.version);
      expect(versions).toEqual(MIGRATIONS.map((m) => m.version));
    } finally {
      await upgraded.close();
      await fresh.close();
    }
  });

  it('databases part-way through either released history (SQLite at 9, PostgreSQL at 3) upgrade to the same schema as fresh ones', async () => {
    const box = new SecretBox(randomBytes(32));
    const sqlitePath = releasedSqlite(9);
    await (await openStore(sqlitePath, { secretBox: box, synchronous: 'NORMAL' })).close();
    const fresh = freshSqlite();
    const freshPath = fresh.name;
    fresh.close();
    await (await openStore(freshPath, { secretBox: box, synchronous: 'NORMAL' })).close();
    expect(sqliteSchema(new Database(sqlitePath, { readonly: true }))).toEqual(sqliteSchema(new Database(freshPath, { readonly: true })));

    const url = await releasedPostgres(3);
    const backend = await openStore(url, { secretBox: box });
    await backend.close();
    const upgraded = new PgDb(url, { max: 2 });
    try {
      expect((await upgraded.rows<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).map((r) => r.version)).toEqual(
        MIGRATIONS.map((m) => m.version),
      );
      expect(await postgresSchema(upgraded)).toEqual(sqliteSchema(new Database(freshPath, { readonly: true })));
      expect(await upgraded.row("SELECT name FROM deployments WHERE id = 'dep'")).toEqual({ name: 'kept' });
    } finally {
      await upgraded.close();
    }
  });
});
