import { existsSync, readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
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
  prepare(text: string): {
    all<T = Record<string, unknown>>(...params: unknown[]): Promise<T[]>;
    get<T = Record<string, unknown>>(...params: unknown[]): Promise<T | undefined>;
    run(...params: unknown[]): Promise<number>;
  };
};

/**
 * Test-only: a connection of its own to the database `url` names (on SQLite, the store's handle, so
 * that `:memory:` is the same database). The server never has one of these.
 */
export function rawSql(url: string, core: Store): RawSql {
  const withPrepare = (raw: Omit<RawSql, 'prepare'>): RawSql => ({
    ...raw,
    prepare: (text) => ({
      all: (...params) => raw.all(text, ...params),
      get: (...params) => raw.get(text, ...params),
      run: (...params) => raw.run(text, ...params),
    }),
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

/**
 * Test-only: a connection of its own to a server process's database (`ServerProcess.databaseUrl`):
 * the SQLite file opened beside the server, or a pool on its PostgreSQL database.
 */
export function openRawSql(databaseUrl: string, options: { readonly?: boolean } = {}): RawSql & { storedBytes(): Promise<Buffer> } {
  if (databaseUrl.startsWith('postgres')) {
    const db = new PgDb(databaseUrl, { max: 2 });
    const raw = rawSqlOn(db);
    return {
      ...raw,
      // Every row of every table as text: what a dump or a disk image of the database would show.
      async storedBytes() {
        const tables = await db.rows<{ name: string }>(
          "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
        );
        const parts: string[] = [];
        for (const { name } of tables) parts.push(...(await db.rows<{ t: string }>(`SELECT t::text AS t FROM "${name}" t`)).map((r) => r.t));
        return Buffer.from(parts.join('\n'));
      },
    };
  }
  const db = new Database(databaseUrl, { readonly: options.readonly ?? false });
  const raw = rawSql(databaseUrl, { db } as unknown as Store);
  return {
    ...raw,
    close: async () => void db.close(),
    // The database's files as they lie on disk, journal included.
    async storedBytes() {
      const files = ['', '-wal', '-shm'].map((suffix) => databaseUrl + suffix).filter((path) => existsSync(path));
      return Buffer.concat(files.map((path) => readFileSync(path)));
    },
  };
}

function rawSqlOn(db: PgDb): RawSql {
  const raw = {
    all: (text: string, ...params: unknown[]) => db.rows(text, params) as never,
    get: (text: string, ...params: unknown[]) => db.row(text, params) as never,
    run: (text: string, ...params: unknown[]) => db.run(text, params),
    close: () => db.close(),
  };
  return {
    ...raw,
    prepare: (text) => ({
      all: (...params) => raw.all(text, ...params),
      get: (...params) => raw.get(text, ...params),
      run: (...params) => raw.run(text, ...params),
    }),
  } as RawSql;
}
