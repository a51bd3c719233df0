import pg from 'pg';
import { postgresConnectionFailure } from '../storage-errors.ts';
import { PG_MIGRATIONS } from './migrations/index.ts';

export type Row = Record<string, unknown>;

/** Something that runs SQL: the pool (one statement, its own transaction) or a transaction's client. */
export type Queryable = { query: (text: string, values?: unknown[]) => Promise<pg.QueryResult> };

/**
 * `?` placeholders (as the SQLite store writes them) numbered as PostgreSQL wants (`$1`, `$2`, …).
 * Only for SQL written in this folder: a `?` inside a string literal would be renumbered too, and
 * none of ours has one.
 */
export function numbered(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

/** The pool's type parsing: 64-bit integers (identities, counts, sizes) as numbers, as SQLite answers them. */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 && format !== 'binary') return (value: string) => Number(value);
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

/** The connection pool, with `?`-style queries and transactions. */
export class PgDb {
  readonly pool: pg.Pool;

  constructor(connectionString: string, options: { max?: number } = {}) {
    this.pool = new pg.Pool({ connectionString, types, max: options.max ?? 10, connectionTimeoutMillis: 10_000 });
    // An idle client's error (the server restarted, a network cut) must not crash the process;
    // the next query on a fresh client reports it.
    this.pool.on('error', () => {});
  }

  async #query(sql: string, values: unknown[], on: Queryable): Promise<pg.QueryResult> {
    try {
      return await on.query(numbered(sql), values);
    } catch (error) {
      throw postgresConnectionFailure(error);
    }
  }

  async rows<T = Row>(sql: string, values: unknown[] = [], on: Queryable = this.pool): Promise<T[]> {
    return (await this.#query(sql, values, on)).rows as T[];
  }

  async row<T = Row>(sql: string, values: unknown[] = [], on: Queryable = this.pool): Promise<T | undefined> {
    return (await this.#query(sql, values, on)).rows[0] as T | undefined;
  }

  /** Rows changed by an INSERT, UPDATE or DELETE. */
  async run(sql: string, values: unknown[] = [], on: Queryable = this.pool): Promise<number> {
    return (await this.#query(sql, values, on)).rowCount ?? 0;
  }

  /**
   * Runs `work` in one transaction on one client (READ COMMITTED: the methods lock the rows they
   * read-modify-write with `FOR UPDATE`); commits when it resolves, rolls back when it throws. A
   * transaction PostgreSQL aborted to break a deadlock (40P01) or a serialization conflict (40001)
   * is run again, a few times: nothing of it was written.
   */
  async tx<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#txOnce(work);
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        if (attempt >= 4 || (code !== '40P01' && code !== '40001')) throw error;
      }
    }
  }

  async #txOnce<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (error) {
      throw postgresConnectionFailure(error);
    }
    let broken = false;
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
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
 * Applies pending migrations, each in one transaction, holding a session advisory lock: two
 * processes starting together migrate once (the second waits, then finds nothing to do).
 */
export async function migrate(db: PgDb): Promise<void> {
  const client = await db.pool.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    try {
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
      const applied = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((r: { version: number }) => r.version));
      for (const migration of PG_MIGRATIONS) {
        if (applied.has(migration.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(migration.sql);
          await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [migration.version, migration.name, new Date().toISOString()]);
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

export function isUniqueViolation(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '23505';
}

export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
