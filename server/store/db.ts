/** A row as either driver returns it: column name → value. */
export type Row = Record<string, unknown>;

/**
 * What a statement is bound to: positional values for `?` placeholders, or named values for
 * `@name` placeholders (one style per statement).
 */
export type Params = readonly unknown[] | Readonly<Record<string, unknown>>;

/** One statement of a write, for writes that list their rows before running them (a create, an audit entry). */
export type Statement = { sql: string; params: Params };

/**
 * The one database interface every store is written on. SQLite (better-sqlite3) and PostgreSQL
 * (pg) each have an adapter; what their SQL does differently lives in `dialect`, never in a store.
 */
export interface Db {
  readonly dialect: Dialect;
  row<T = Row>(sql: string, params?: Params): Promise<T | undefined>;
  rows<T = Row>(sql: string, params?: Params): Promise<T[]>;
  /** Rows changed by an INSERT, UPDATE or DELETE. */
  run(sql: string, params?: Params): Promise<number>;
  /**
   * Runs `work` in one transaction on the handle it is given; commits when it resolves, rolls back
   * when it throws. Called on a transaction's handle, `work` joins that transaction.
   */
  tx<T>(work: (tx: Db) => Promise<T>): Promise<T>;
  /**
   * `row` answered synchronously where the database can read at once: SQLite (its driver is
   * synchronous) while no transaction of the adapter is open; `NOT_NOW` when the read must wait for
   * one. Absent where every read is a round trip (PostgreSQL). For `rowThen`.
   */
  rowNow?<T = Row>(sql: string, params?: Params): T | undefined | typeof NOT_NOW;
}

/** What `Db.rowNow` answers when the read cannot be made at once: `row` is the way then. */
export const NOT_NOW: unique symbol = Symbol('not now');

/**
 * `db.row` for a caller that takes a callback: `done` is called once, with the read's error, or with
 * its row as `map` makes it (null when there is none); at once (in this call) where the database
 * answers synchronously (`rowNow`), else when the read settles. A hot read on SQLite then makes no
 * promise and waits for no microtask: most of what the GET revision lane did beyond a bare server
 * was its promises from route to store and back. `map` is passed, not wrapped in `done`, so a read
 * makes no function of its own.
 */
export function rowThen<T>(db: Db, sql: string, params: Params, map: (row: Row) => T, done: (error: unknown, value?: T | null) => void): void {
  let row: Row | undefined | typeof NOT_NOW;
  try {
    row = db.rowNow ? db.rowNow(sql, params) : NOT_NOW;
  } catch (error) {
    done(error);
    return;
  }
  if (row === NOT_NOW) db.row(sql, params).then((found) => settleMapped(found, map, done), done);
  else settleMapped(row, map, done);
}

/** `done` with `row` as `map` makes it, or with the error `map` throws; `done`'s own errors are its caller's. */
function settleMapped<T>(row: Row | undefined, map: (row: Row) => T, done: (error: unknown, value?: T | null) => void): void {
  let mapped: T | null;
  try {
    mapped = row === undefined ? null : map(row);
  } catch (error) {
    done(error);
    return;
  }
  done(null, mapped);
}

/**
 * The fragments of SQL the two databases spell differently, and the few things one of them needs
 * that the other does by itself. Stores splice these into their one text of each statement.
 */
export interface Dialect {
  readonly name: 'sqlite' | 'postgres';
  /** `column` is one of the list bound at `param` (bind `list(values)` there); `of` is the list's element type. */
  inList(column: string, param: string, of?: 'text' | 'bigint'): string;
  /** A list of values as `inList` wants it bound. */
  list(values: readonly unknown[]): unknown;
  /** LIKE that ignores ASCII case (SQLite's LIKE does already). */
  readonly likeIgnoringCase: string;
  /** The text of a key in a JSON text column. */
  jsonText(column: string, key: string): string;
  /** Text ordered byte by byte, whatever the server's locale (SQLite's default). */
  readonly byteOrder: string;
  /** Appended to a SELECT whose rows the transaction will change: a lock where rows can be locked. */
  readonly forUpdate: string;
  /** The same, skipping rows another transaction holds, so workers take disjoint rows. */
  readonly forUpdateSkipLocked: string;
  /** A lock that keeps a referenced row from being deleted meanwhile (not from being updated). */
  readonly forKeyShare: string;
  readonly forShare: string;
  /** An inner join whose tables are read in the order written (SQLite's planner may not reorder CROSS JOIN). */
  readonly joinInOrder: string;
  /** A value large enough to need fresh pages when written (the write probe's row). */
  readonly pageFiller: string;
  /**
   * UPDATE at most `limit` rows of `table` matching `where` (checked again on each row it changes),
   * picked by `key` in `order`, and RETURNING `returning`. PostgreSQL locks the picked rows in a CTE
   * (a subquery under IN may be run again per row and pick more); SQLite's single writer needs none.
   */
  updatePicked(input: {
    table: string;
    key: string;
    set: string;
    where: string;
    limit: string;
    order?: string;
    skipLocked?: boolean;
    returning: string;
  }): string;
  /**
   * Serializes the transactions that pass the same `key` until they end: an advisory lock on
   * PostgreSQL; nothing on SQLite, where a write transaction already excludes every other.
   */
  serialize(tx: Db, key: string): Promise<void>;
  isUniqueViolation(error: unknown): boolean;
  /** How the one schema history (`migrations/`) spells what the two databases declare differently. */
  readonly schema: SchemaDialect;
}

/** Column types and declarations of the schema that differ between the two databases. */
export interface SchemaDialect {
  /** An ever-growing integer key, the table's order of insertion (`seq`). */
  readonly serialKey: string;
  /**
   * The order rows were inserted in, for ties in lists (`ORDER BY created_at, rowid`): SQLite has
   * it on every table already; PostgreSQL gets an identity column of that name.
   */
  readonly rowidColumn: string;
  /** A 64-bit integer column (GitHub ids, sizes): SQLite's INTEGER is 64-bit already. */
  readonly bigint: string;
  readonly bytes: string;
  /** The same as `Dialect.jsonText`, for migrations that fill a column from the JSON. */
  jsonText(column: string, key: string): string;
  /**
   * A foreign key to a table created later: inline on SQLite (checked only when rows change),
   * added by `laterReference` once the table exists on PostgreSQL.
   */
  inlineReference(target: string): string;
  laterReference(table: string, name: string, column: string, target: string): string;
  /** A trigger that runs `statement` after each insert into `table` whose new row satisfies `when`. */
  afterInsertTrigger(name: string, table: string, when: string, statement: string): string;
  /**
   * A trigger that runs `statement` after each `event` (`INSERT`, `UPDATE OF column`) on a row of
   * `table` for which `when` holds; `when` may read `NEW`, `OLD` and subqueries (PostgreSQL checks
   * it inside the trigger's function, since its WHEN clause may hold no subquery).
   */
  afterRowTrigger(name: string, event: string, table: string, when: string, statement: string): string;
  /** The current time as the contract's timestamp text (`2026-11-22T10:00:00.000Z`), inside a trigger. */
  readonly nowText: string;
}
