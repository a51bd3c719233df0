import { join } from 'node:path';
import Database from 'better-sqlite3';
import { REVISION_RECORD_COLUMNS } from '../../server/store/queries/hot-paths.ts';
import type { LoadRequest } from './load.ts';
import { type Child, startChild, tempDir } from './processes.ts';
import { ENCRYPTION_KEY } from './settings.ts';

/**
 * The bare node:http + better-sqlite3 server (bench/baselines/http-sqlite.mjs) on a copy of the
 * real server's database, made now (once the server has created its deployments): it reads the
 * same rows through the same statements and writes the same three rows per create. `groupCommit`:
 * its creates asked for in one turn share one transaction, as the server's SQLite store commits them.
 * `sameRows`: it writes every row the server's create writes, row for row (the revision past the
 * sandbox's first step, its log line, the audit entry); see `sameRowsPerCreate`. `ids`: the ids of a
 * create's rows, `time-ordered` as the server's (docs/decisions/time-ordered-ids.md: a group's index
 * entries on the same last pages) or `random` as the server's were before. By default the grouped
 * baselines take the server's; the plain one (one commit per create, and the GET floor) keeps random
 * ids: one create per commit writes a page per index whatever its ids, and it stays plain JavaScript
 * (the time-ordered ids are the server's TypeScript module, which would load Node's type stripper
 * into the GET floor's process).
 */
export async function startSqliteBaseline(options: {
  serverDatabasePath: string;
  tenantId: string;
  synchronous: string;
  groupCommit: boolean;
  sameRows?: boolean;
  ids?: 'time-ordered' | 'random';
  name: string;
  /** Node's own options (a profiler's). */
  nodeArgs?: readonly string[];
  /** An experiment's passenger in the same process (BASELINE_CARRY in the baseline); none by default. */
  carry?: string;
}): Promise<Child & { databasePath: string }> {
  const copy = join(tempDir(), options.name);
  const source = new Database(options.serverDatabasePath, { readonly: true });
  await source.backup(copy);
  source.close();
  const child = await startChild(
    'bench/baselines/http-sqlite.mjs',
    {
      BASELINE_DB: copy,
      // The same revision read as the server's (its column list, not *).
      BASELINE_REVISION_COLUMNS: REVISION_RECORD_COLUMNS,
      BASELINE_TENANT_ID: options.tenantId,
      BASELINE_SYNCHRONOUS: options.synchronous,
      BASELINE_ENCRYPTION_KEY: ENCRYPTION_KEY,
      BASELINE_GROUP_COMMIT: options.groupCommit ? '1' : '0',
      BASELINE_SAME_ROWS: options.sameRows ? '1' : '0',
      BASELINE_IDS: options.ids ?? (options.groupCommit ? 'time-ordered' : 'random'),
      ...(options.carry ? { BASELINE_CARRY: options.carry } : {}),
    },
    options.nodeArgs,
  );
  return { ...child, databasePath: copy };
}

/** The baseline must answer what the server answers, byte for byte, or the comparison means nothing. */
export async function sameBytes(serverUrl: string, baselineUrl: string, path: string, headers: Record<string, string>): Promise<void> {
  const [ours, bare] = await Promise.all([fetch(serverUrl + path, { headers }).then((r) => r.text()), fetch(baselineUrl + path).then((r) => r.text())]);
  if (ours !== bare) throw new Error(`the SQLite baseline answers other bytes than the server for ${path}:\nserver:   ${ours}\nbaseline: ${bare}`);
}

/** The tables a create writes to, directly or through the schema's triggers. */
const CREATE_TABLES = ['deployments', 'revisions', 'revision_logs', 'tracing_projects', 'audit_events', 'github_outbox', 'event_deliveries'] as const;

/** How many rows each table of `CREATE_TABLES` has in the SQLite file `path`. */
function tableCounts(path: string): Record<string, number> {
  const db = new Database(path, { readonly: true });
  try {
    return Object.fromEntries(CREATE_TABLES.map((table) => [table, (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n]));
  } finally {
    db.close();
  }
}

/** The rows `count` creates (`post`, one at a time) add to each table of the database at `path`. */
export async function rowsPerCreates(url: string, path: string, post: LoadRequest, count = 5): Promise<Record<string, number>> {
  const before = tableCounts(path);
  for (let i = 0; i < count; i += 1) {
    const response = await fetch(url + post.path, { method: 'POST', headers: post.headers, body: post.body?.() });
    if (response.status !== 201) throw new Error(`create on ${url}: ${response.status} ${await response.text()}`);
  }
  const after = tableCounts(path);
  return Object.fromEntries(CREATE_TABLES.map((table) => [table, after[table]! - before[table]!]));
}

/**
 * The row-for-row baseline must write what the server writes, table for table, or its ratio means
 * nothing: the same creates on both, the rows they added compared. Answers the line to print.
 */
export async function sameRowsPerCreate(
  server: { url: string; databasePath: string; post: LoadRequest },
  bare: { url: string; databasePath: string; post: LoadRequest },
): Promise<string> {
  const [ours, theirs] = [await rowsPerCreates(server.url, server.databasePath, server.post), await rowsPerCreates(bare.url, bare.databasePath, bare.post)];
  const line = (rows: Record<string, number>) => CREATE_TABLES.map((table) => `${table} ${rows[table]}`).join(', ');
  if (line(ours) !== line(theirs))
    throw new Error(`the row-for-row baseline writes other rows than the server for 5 creates:\nserver:   ${line(ours)}\nbaseline: ${line(theirs)}`);
  return `rows written by 5 creates, the server and the row-for-row baseline alike: ${line(ours)}`;
}
