import type Database from 'better-sqlite3';
import { type AuditEntry, pendingAudit } from '../../lib/request-scope.ts';
import { auditInsert, mayChangeRows } from '../audit.ts';
import { type Db, NOT_NOW, type Params, type Row } from '../db.ts';
import { sqliteDialect } from '../dialect.ts';

/**
 * The better-sqlite3 adapter. Every statement is prepared once per SQL text and kept (preparing
 * costs more than running one of ours). Statements run synchronously; the answers are promises
 * only to fit the one interface.
 *
 * A transaction spans awaits, and the connection is shared: while one is open, statements from
 * outside it wait for it to end instead of running inside it (and being committed or rolled back
 * with work that is not theirs).
 */
/** A prepared statement, and whether SQLite says it only reads (`Statement.readonly`). */
type Prepared = { statement: Database.Statement; reads: boolean };

export class SqliteDb implements Db {
  readonly dialect = sqliteDialect;
  readonly raw: Database.Database;
  /**
   * Each SQL text's prepared statement, and whether it only reads: SQLite's answer does not change
   * for a prepared statement, and `readonly` is a native getter (a call into better-sqlite3), asked
   * once here rather than on every read.
   */
  readonly #statements = new Map<string, Prepared>();
  /** Settles when the open transaction ends; null while none is open. */
  #open: Promise<void> | null = null;
  readonly #inTx: Db;

  constructor(raw: Database.Database) {
    this.raw = raw;
    const direct: Db = {
      dialect: sqliteDialect,
      row: <T>(sql: string, params?: Params) => settle(() => this.statement(sql).get(...bind(params)) as T | undefined),
      rows: <T>(sql: string, params?: Params) => settle(() => this.statement(sql).all(...bind(params)) as T[]),
      run: (sql: string, params?: Params) => settle(() => this.statement(sql).run(...bind(params)).changes),
      tx: <T>(work: (tx: Db) => Promise<T>): Promise<T> => work(direct),
    };
    this.#inTx = direct;
  }

  /** The prepared statement for `sql`, prepared on first use. */
  statement(sql: string): Database.Statement {
    return this.#prepared(sql).statement;
  }

  #prepared(sql: string): Prepared {
    let prepared = this.#statements.get(sql);
    if (!prepared) {
      const statement = this.raw.prepare(sql);
      prepared = { statement, reads: statement.readonly };
      this.#statements.set(sql, prepared);
    }
    return prepared;
  }

  row<T = Row>(sql: string, params?: Params): Promise<T | undefined> {
    if (this.#open) return this.#open.then(() => this.row<T>(sql, params));
    // Inline rather than through the transaction's handle: this is every request's read.
    try {
      const { statement, reads } = this.#prepared(sql);
      // A request with an audit entry to write: a statement on its own is a transaction of its own,
      // so the entry is written with it if it changes anything (an UPDATE … RETURNING). SQLite says
      // whether a prepared statement writes (`readonly`): a read asks neither the request scope
      // nor the SQL's text.
      if (!reads && pendingAudit()) return this.tx((tx) => tx.row<T>(sql, params));
      return Promise.resolve(statement.get(...bind(params)) as T | undefined);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * `row` without a promise, for a read (a statement that writes is refused: its audit entry is
   * `row`'s to handle); `NOT_NOW` while a transaction is open, whose uncommitted rows a read from
   * outside it must not see. Throws what the statement throws.
   */
  rowNow<T = Row>(sql: string, params?: Params): T | undefined | typeof NOT_NOW {
    if (this.#open) return NOT_NOW;
    const { statement, reads } = this.#prepared(sql);
    if (!reads) throw new Error('rowNow reads only: a statement that writes goes through row');
    return statement.get(...bind(params)) as T | undefined;
  }

  rows<T = Row>(sql: string, params?: Params): Promise<T[]> {
    if (this.#open) return this.#open.then(() => this.rows<T>(sql, params));
    return this.#writes(sql) && pendingAudit() ? this.tx((tx) => tx.rows<T>(sql, params)) : this.#inTx.rows<T>(sql, params);
  }

  /** Whether `sql` may change rows, as SQLite judges its prepared statement; a statement that does not prepare is left to fail where it runs. */
  #writes(sql: string): boolean {
    try {
      return !this.#prepared(sql).reads;
    } catch {
      return mayChangeRows(sql);
    }
  }

  run(sql: string, params?: Params): Promise<number> {
    if (this.#open) return this.#open.then(() => this.run(sql, params));
    return pendingAudit() ? this.tx((tx) => tx.run(sql, params)) : this.#inTx.run(sql, params);
  }

  /** Writes an audit entry now, synchronously, inside the transaction that is open (the group commit of creates too). */
  writeAudit(entry: AuditEntry): void {
    const { sql, params } = auditInsert(entry);
    this.statement(sql).run(...bind(params));
  }

  #totalChanges(): number {
    return (this.statement('SELECT total_changes() AS n').get() as { n: number }).n;
  }

  /** True while a transaction of this adapter is open (synchronous writers wait for it). */
  get busy(): boolean {
    return this.#open !== null;
  }

  async tx<T>(work: (tx: Db) => Promise<T>): Promise<T> {
    while (this.#open) await this.#open;
    let end!: () => void;
    this.#open = new Promise<void>((resolve) => (end = resolve));
    const audit = pendingAudit();
    try {
      // IMMEDIATE: the write lock is taken (or waited for, up to the busy timeout) at the start,
      // never half-way through, where another connection holding it would fail the transaction.
      this.statement('BEGIN IMMEDIATE').run();
      const changesBefore = audit ? this.#totalChanges() : 0;
      const result = await work(this.#inTx);
      // The request's audit entry goes into the first of its transactions that changed something.
      if (audit?.state === 'pending' && this.#totalChanges() > changesBefore) {
        this.writeAudit(audit.entry);
        audit.state = 'writing';
      }
      this.statement('COMMIT').run();
      if (audit?.state === 'writing') audit.state = 'written';
      return result;
    } catch (error) {
      if (this.raw.inTransaction) this.statement('ROLLBACK').run();
      throw error;
    } finally {
      if (audit?.state === 'writing') audit.state = 'pending';
      this.#open = null;
      end();
    }
  }
}

const NONE: unknown[] = [];
function bind(params: Params | undefined): readonly unknown[] {
  if (params === undefined) return NONE;
  return Array.isArray(params) ? params : [params];
}

/** A synchronous call's value or error as a promise, so a failed statement rejects instead of throwing. */
function settle<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
}
