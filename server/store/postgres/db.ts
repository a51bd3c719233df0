import { availableParallelism } from 'node:os';
import pg from 'pg';
import { pendingAudit } from '../../lib/request-scope.ts';
import { auditInsert, mayChangeRows } from '../audit.ts';
import type { Db, Params, Row, Statement } from '../db.ts';
import { postgresDialect } from '../dialect.ts';
import { adoptedVersions, appliedRow, FORMER_POSTGRES_HISTORY_CHECK, pendingMigrations, SCHEMA_MIGRATIONS_TABLE } from '../migrate.ts';
import { hotQueries } from '../queries/hot-paths.ts';
import { postgresConnectionFailure } from '../storage-errors.ts';
import { type PipelinedStatement, StatementPipeline } from './pipeline.ts';
import { BatchFailure, ReadBatcher } from './read-batch.ts';

/** Something that runs SQL: the pool (one statement, its own transaction) or a transaction's client. */
export type Queryable = { query: (text: string, values?: unknown[]) => Promise<pg.QueryResult> };

/**
 * `?` placeholders numbered as PostgreSQL wants (`$1`, `$2`, …). Only for SQL written in the
 * stores: a `?` inside a string literal would be renumbered too, and none of ours has one.
 */
export function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** `@name` placeholders as `$n` (one number per name, however often it is used): the text, and the names in number order. */
type NamedTemplate = { text: string; names: readonly string[] };
const templates = new Map<string, NamedTemplate>();
function namedTemplate(sql: string): NamedTemplate {
  let template = templates.get(sql);
  if (template === undefined) {
    const names: string[] = [];
    const text = sql.replace(/@(\w+)/g, (_, name: string) => {
      if (!names.includes(name)) names.push(name);
      return `$${names.indexOf(name) + 1}`;
    });
    template = { text, names };
    // The stores' texts are a bounded set; the limit keeps a text built with values in it (none should be) from growing the map.
    if (templates.size < 2000) templates.set(sql, template);
  }
  return template;
}

/**
 * `@name` placeholders as `$n` and their values in that order; the text converted once per SQL
 * text (a create's insert of a deployment names nineteen values: rewritten on every create, it was
 * a regular expression's pass over its text each time).
 */
function namedToNumbered(sql: string, named: Readonly<Record<string, unknown>>): { text: string; values: unknown[] } {
  const { text, names } = namedTemplate(sql);
  const values = names.map((name) => {
    if (!(name in named)) throw new Error(`Missing named parameter '${name}'`);
    return named[name];
  });
  return { text, values };
}

/** Statement text and values as pg takes them, from either placeholder style; converted once per text. */
const converted = new Map<string, string>();
function toPg(sql: string, params: Params | undefined): { text: string; values: unknown[] } {
  if (params === undefined || Array.isArray(params)) {
    let text = converted.get(sql);
    if (text === undefined) converted.set(sql, (text = numbered(sql)));
    return { text, values: (params as unknown[] | undefined) ?? [] };
  }
  return namedToNumbered(sql, params as Readonly<Record<string, unknown>>);
}

/**
 * The statements sent as prepared statements (`PipelinedStatement.name`): the hot paths' reads
 * (`hotQueries`: a revision's read, a create's integration read…) and the statements of a
 * `batch(…, { prepared: true })` (a create's). A fixed set, so each connection holds a few dozen
 * at most; the rest, dynamic text among them (lists' filters), are parsed and planned each time.
 */
const HOT_SQL: ReadonlySet<string> = new Set(Object.values(hotQueries(postgresDialect)));
const statementNames = new Map<string, string>();
/** `statement` with its prepared statement's name: one per text, the same on every connection. */
function named(statement: PipelinedStatement): PipelinedStatement {
  let name = statementNames.get(statement.text);
  if (name === undefined) statementNames.set(statement.text, (name = `cp_${statementNames.size + 1}`));
  return { ...statement, name };
}

/**
 * A prepared statement PostgreSQL no longer runs as prepared: its result's columns changed (another
 * process's migration added one to a `SELECT *`: 0A000), or the connection no longer has it (26000:
 * someone deallocated it, or a pooler in front of PostgreSQL moved us to another server connection).
 * Nothing of it ran; the pipeline forgot the name, so it is sent again and prepared anew.
 */
function preparedStatementLost(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return code === '26000' || (code === '0A000' && /cached plan/.test(String((error as { message?: unknown }).message)));
}

/** The pool's type parsing: 64-bit integers (identities, counts, sizes) as numbers, as SQLite answers them. */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 && format !== 'binary') return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

async function query(on: Queryable, sql: string, params: Params | undefined): Promise<pg.QueryResult> {
  const { text, values } = toPg(sql, params);
  try {
    return await (on instanceof pg.Pool ? onPooledClient(on, text, values) : on.query(text, values));
  } catch (error) {
    throw postgresConnectionFailure(error);
  }
}

/**
 * One statement on a client of the pool, which goes back to the pool whatever the statement's
 * error. `pool.query` would close the connection on any error (pg-pool releases it with the error),
 * so every refused statement (a unique violation, a NUL in text) cost the next one a new connection
 * and its SCRAM authentication: 20-40 ms instead of 1 (docs/decisions/postgresql-statement-errors.md).
 * An error PostgreSQL answered (it has a SQLSTATE) leaves the connection as good as before; one
 * without, or a client no longer usable, is dropped (pg-pool checks that too).
 */
async function onPooledClient(pool: pg.Pool, text: string, values: unknown[]): Promise<pg.QueryResult> {
  const client = await pool.connect();
  let broken = false;
  try {
    return await client.query(text, values);
  } catch (error) {
    broken = connectionUnusable(error);
    throw error;
  } finally {
    client.release(broken);
  }
}

/** Whether a statement's error leaves its connection unusable: no SQLSTATE (a socket error), a connection failure (08) or the server going away (57). */
function connectionUnusable(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code !== 'string' || code.startsWith('08') || code.startsWith('57');
}

/**
 * Runs `attempt` again when PostgreSQL aborted it to break a deadlock (40P01) or a serialization
 * conflict (40001), or lost a prepared statement (`preparedStatementLost`), a few times:
 * nothing of it was written.
 */
async function retriedOnConflict<T>(attempt: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (tries >= 4 || (code !== '40P01' && code !== '40001' && !preparedStatementLost(error))) throw error;
    }
  }
}

/**
 * Whether a lone statement may share a pipeline with other requests' reads (`ReadBatcher`): a plain
 * SELECT. Not one that locks rows, takes an advisory lock, notifies or moves a sequence: those keep
 * a transaction of their own, ended as soon as they are. Decided once per text.
 */
const groupable = new Map<string, boolean>();
const SIDE_EFFECTS = /\bFOR\s+(UPDATE|SHARE|NO\s+KEY|KEY\s+SHARE)\b|pg_advisory|pg_notify|pg_sleep|nextval|setval/i;
function mayGroup(sql: string): boolean {
  let verdict = groupable.get(sql);
  if (verdict === undefined) groupable.set(sql, (verdict = !mayChangeRows(sql) && !SIDE_EFFECTS.test(sql)));
  return verdict;
}

const CHANGING_COMMANDS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

/** One transaction's client as a `Db`; a `tx` on it joins the transaction. */
class PgTx implements Db, Queryable {
  readonly dialect = postgresDialect;
  readonly #client: pg.PoolClient;
  /** Whether a statement of this transaction changed a row (its audit entry is written then). */
  changed = false;

  constructor(client: pg.PoolClient) {
    this.#client = client;
  }

  async query(text: string, values?: unknown[]): Promise<pg.QueryResult> {
    return this.#noted(await this.#client.query(text, values));
  }

  async row<T = Row>(sql: string, params?: Params): Promise<T | undefined> {
    return (await query(this, sql, params)).rows[0] as T | undefined;
  }

  async rows<T = Row>(sql: string, params?: Params): Promise<T[]> {
    return (await query(this, sql, params)).rows as T[];
  }

  async run(sql: string, params?: Params): Promise<number> {
    return (await query(this, sql, params)).rowCount ?? 0;
  }

  #noted(result: pg.QueryResult): pg.QueryResult {
    if (!this.changed && (result.rowCount ?? 0) > 0 && CHANGING_COMMANDS.has(result.command)) this.changed = true;
    return result;
  }

  tx<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    return work(this);
  }
}

/** The pg adapter: a connection pool, `?`- or `@name`-style statements, and transactions. */
export class PgDb implements Db {
  readonly dialect = postgresDialect;
  readonly pool: pg.Pool;
  readonly #reads: ReadBatcher;
  /** Lone reads in flight for the pool's size, or as given: fixed (`readsInFlight`) or shared by the processes (`sharedBy`). */
  readonly #readsFor: (processes: number) => number;

  /**
   * `readsInFlight`: lone reads sent at a time before the next ones wait to leave together
   * (`ReadBatcher`), fixed. By default one per core shared by the server processes on the database
   * (`sharedBy`; one process until told), at least one, and no more than half the pool, so that
   * where the machine reports many cores the reads still group instead of queueing for a client of
   * the pool, and transactions keep clients of their own.
   */
  constructor(connectionString: string, options: { max?: number; readsInFlight?: number } = {}) {
    const max = options.max ?? 10;
    this.pool = new pg.Pool({ connectionString, types, max, connectionTimeoutMillis: 10_000 });
    // An idle client's error (the server restarted, a network cut) must not crash the process;
    // the next query on a fresh client reports it.
    this.pool.on('error', () => {});
    const given = options.readsInFlight;
    this.#readsFor = given === undefined ? (processes) => Math.min(Math.floor(availableParallelism() / processes), Math.floor(max / 2)) : () => given;
    this.#reads = new ReadBatcher(
      {
        one: async (statement) =>
          statement.name === undefined
            ? onPooledClient(this.pool, statement.text, statement.values)
            : (await this.#pipeline(new StatementPipeline([statement], types)))[0]!,
        many: (statements) => this.#readPipeline(statements),
      },
      this.#readsFor(1),
    );
  }

  /** Lone reads sent at a time now (`ReadBatcher`). */
  get readsInFlight(): number {
    return this.#reads.inFlight;
  }

  /**
   * `processes` server processes (this one included) now use the database: they share the cores,
   * so each sends that share of the reads at a time. Three processes on two cores each sending two
   * at a time formed groups a third the size and paid twice the CPU per GET in round trips
   * (docs/decisions/postgresql-three-processes.md, session 47).
   */
  sharedBy(processes: number): void {
    this.#reads.inFlight = this.#readsFor(Math.max(1, processes));
  }

  /** A statement outside the caller's transactions: a plain read may go with other reads (`ReadBatcher`). */
  async #lone(sql: string, params: Params | undefined, on: Queryable): Promise<pg.QueryResult> {
    if (on !== this.pool || !mayGroup(sql)) return query(on, sql, params);
    const statement = HOT_SQL.has(sql) ? named(toPg(sql, params)) : toPg(sql, params);
    // A second try only for a prepared statement PostgreSQL lost: it is prepared anew (`preparedStatementLost`).
    for (let tries = 1; ; tries++) {
      try {
        return await this.#reads.read(statement);
      } catch (error) {
        if (tries >= 2 || !preparedStatementLost(error)) throw postgresConnectionFailure(error);
      }
    }
  }

  /**
   * `on`: a transaction's handle to run it in (the pool, one statement's own transaction, when
   * absent). A request with an audit entry to write runs a lone statement in a transaction, so the
   * entry is written with it if it changes anything.
   */
  async rows<T = Row>(sql: string, params?: Params, on: Queryable = this.pool): Promise<T[]> {
    if (on === this.pool && pendingAudit() && mayChangeRows(sql)) return this.tx((tx) => tx.rows<T>(sql, params));
    return (await this.#lone(sql, params, on)).rows as T[];
  }

  async row<T = Row>(sql: string, params?: Params, on: Queryable = this.pool): Promise<T | undefined> {
    if (on === this.pool && pendingAudit() && mayChangeRows(sql)) return this.tx((tx) => tx.row<T>(sql, params));
    return (await this.#lone(sql, params, on)).rows[0] as T | undefined;
  }

  async run(sql: string, params?: Params, on: Queryable = this.pool): Promise<number> {
    if (on === this.pool && pendingAudit()) return this.tx((tx) => tx.run(sql, params));
    return (await query(on, sql, params)).rowCount ?? 0;
  }

  /**
   * Runs `work` in one transaction on one client (READ COMMITTED: the stores lock the rows they
   * read-modify-write with the dialect's `forUpdate`); commits when it resolves, rolls back when it
   * throws. A transaction PostgreSQL aborted to break a deadlock (40P01) or a serialization
   * conflict (40001) is run again, a few times: nothing of it was written.
   */
  tx<T>(work: (tx: PgTx) => Promise<T>): Promise<T> {
    return retriedOnConflict(() => this.#txOnce(work));
  }

  /**
   * Runs `statements` in order as one transaction in ONE round trip (`StatementPipeline`), where
   * `tx` costs one per statement plus BEGIN and COMMIT; answers each statement's result. For writes
   * that change rows when they succeed (a create): the request's pending audit entry is sent last in
   * the same transaction. Statements that depend on what an earlier one answered need `tx`.
   * Retried on a deadlock or serialization conflict as `tx` is. `prepared`: the statements (and
   * the audit entry's) are sent as prepared statements, for a batch of fixed texts run often (a
   * create), never for dynamic text: each connection keeps every text it was sent this way.
   */
  batch(statements: readonly Statement[], options: { prepared?: boolean } = {}): Promise<pg.QueryResult[]> {
    return retriedOnConflict(() => this.#batchOnce(statements, options.prepared === true));
  }

  /** A client of the pool; failing to get one is the store's connection failure. */
  async #client(): Promise<pg.PoolClient> {
    try {
      return await this.pool.connect();
    } catch (error) {
      throw postgresConnectionFailure(error);
    }
  }

  async #batchOnce(statements: readonly Statement[], prepared: boolean): Promise<pg.QueryResult[]> {
    const pipelined = statements.map((statement) => toPg(statement.sql, statement.params));
    const audit = pendingAudit();
    const auditing = audit?.state === 'pending';
    if (auditing) {
      const { sql, params } = auditInsert(audit.entry);
      pipelined.push(toPg(sql, params));
    }
    try {
      if (auditing) audit.state = 'writing';
      const results = await this.#pipeline(new StatementPipeline(prepared ? pipelined.map(named) : pipelined, types));
      if (auditing) audit.state = 'written';
      return results.slice(0, statements.length);
    } catch (error) {
      if (auditing) audit.state = 'pending';
      throw postgresConnectionFailure(error);
    }
  }

  /** Several lone reads as one pipeline; a failure says how far it got (`BatchFailure`), for `ReadBatcher`. */
  async #readPipeline(statements: readonly PipelinedStatement[]): Promise<pg.QueryResult[]> {
    const pipeline = new StatementPipeline(statements, types);
    try {
      return await this.#pipeline(pipeline);
    } catch (error) {
      const failed = pipeline.failure;
      throw failed ? new BatchFailure(error, failed.at, failed.answered, !connectionUnusable(error)) : error;
    }
  }

  /** Sends `pipeline` on a client of the pool and answers its results; the client goes back to the pool unless the connection failed. */
  async #pipeline(pipeline: StatementPipeline): Promise<pg.QueryResult[]> {
    const client = await this.#client();
    let broken = false;
    try {
      client.query(pipeline as unknown as pg.QueryConfig);
      return await pipeline.done;
    } catch (error) {
      broken = connectionUnusable(error);
      throw error;
    } finally {
      client.release(broken);
    }
  }

  async #txOnce<T>(work: (tx: PgTx) => Promise<T>): Promise<T> {
    const client = await this.#client();
    let broken = false;
    const audit = pendingAudit();
    try {
      await client.query('BEGIN');
      const tx = new PgTx(client);
      const result = await work(tx);
      // The request's audit entry goes into the first of its transactions that changed something.
      if (audit?.state === 'pending' && tx.changed) {
        audit.state = 'writing';
        const { sql, params } = auditInsert(audit.entry);
        await query(client, sql, params);
      }
      await client.query('COMMIT');
      if (audit?.state === 'writing') audit.state = 'written';
      return result;
    } catch (error) {
      if (audit?.state === 'writing') audit.state = 'pending';
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true;
      }
      throw postgresConnectionFailure(error);
    } finally {
      client.release(broken);
    }
  }

  #closed: Promise<void> | undefined;
  /** Ends the pool (once, however often it is called). */
  close(): Promise<void> {
    return (this.#closed ??= this.pool.end());
  }
}

/** A number no other application is likely to lock with: the control plane's migrations. */
const MIGRATION_LOCK = 7_245_193_001;

/**
 * Applies pending migrations of the one history (`../migrations/`), each in one transaction, holding a session advisory lock: two
 * processes starting together migrate once (the second waits, then finds nothing to do).
 */
export async function migrate(db: PgDb): Promise<void> {
  const client = await db.pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query(SCHEMA_MIGRATIONS_TABLE);
      const record = 'INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)';
      let applied = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r: { version: number }) => r.version));
      if (applied.size > 0 && Math.max(...applied) <= 6 && (await client.query(FORMER_POSTGRES_HISTORY_CHECK)).rowCount === 1) {
        await client.query('BEGIN');
        try {
          await client.query('DELETE FROM schema_migrations WHERE version > 0');
          for (const row of adoptedVersions(applied)) await client.query(record, row);
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
        applied = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r: { version: number }) => r.version));
      }
      for (const migration of pendingMigrations(applied)) {
        await client.query('BEGIN');
        try {
          await client.query(migration.sql(postgresDialect.schema));
          await client.query(record, appliedRow(migration));
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]);
    }
  } finally {
    client.release();
  }
}
