import type Database from 'better-sqlite3';
import { PgDb } from '../../server/store/postgres/db.ts';
import type { SqliteStore } from '../../server/store/sqlite.ts';
import type { Store } from '../../server/store/types.ts';

/** Rows straight from the tables, for tests that check what is stored; `?` placeholders on both backends. */
export type RawSql = {
  all<T = Record<string, unknown>>(text: string, ...params: unknown[]): Promise<T[]>;
  get<T = Record<string, unknown>>(text: string, ...params: unknown[]): Promise<T | undefined>;
  run(text: string, ...params: unknown[]): Promise<number>;
  close(): Promise<void>;
  /** The same, shaped like better-sqlite3's `prepare(text).get(…)`, so a test reads alike on both backends. */
  prepare(text: string): { all<T = Record<string, unknown>>(...params: unknown[]): Promise<T[]>; get<T = Record<string, unknown>>(...params: unknown[]): Promise<T | undefined>; run(...params: unknown[]): Promise<number> };
};

/**
 * Test-only: a connection of its own to the database `url` names (on SQLite, the store's handle, so
 * that `:memory:` is the same database). The server never has one of these.
 */
export function rawSql(url: string, core: Store): RawSql {
  const withPrepare = (raw: Omit<RawSql, 'prepare'>): RawSql => ({
    ...raw,
    prepare: (text) => ({ all: (...params) => raw.all(text, ...params), get: (...params) => raw.get(text, ...params), run: (...params) => raw.run(text, ...params) }),
  });
  if (!url.startsWith('postgres')) {
    const db = (core as SqliteStore).db as Database.Database;
    return withPrepare({
      all: async (text, ...params) => db.prepare(text).all(...params) as never,
      get: async (text, ...params) => db.prepare(text).get(...params) as never,
      run: async (text, ...params) => db.prepare(text).run(...params).changes,
      close: async () => {},
    });
  }
  // The store's own pool class: numbers come back as numbers, as from SQLite.
  const db = new PgDb(url, { max: 2 });
  return withPrepare({
    all: (text, ...params) => db.rows(text, params) as never,
    get: (text, ...params) => db.row(text, params) as never,
    run: (text, ...params) => db.run(text, params),
    close: () => db.close(),
  });
}
