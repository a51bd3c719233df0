import Database from 'better-sqlite3';
import { PgDb } from '../../server/store/postgres/db.ts';
import type { ServerProcess } from '../helpers/server-process.ts';

/**
 * Test-only: a connection of its own to a server process's database (SQLite file or PostgreSQL),
 * for checking what is stored and for moving a stored time into the past.
 */
export function serverSql(server: Pick<ServerProcess, 'databaseUrl' | 'databasePath'>) {
  if (server.databaseUrl.startsWith('postgres')) {
    const db = new PgDb(server.databaseUrl, { max: 1 });
    return {
      all: <T = Record<string, unknown>>(text: string, ...params: unknown[]) => db.rows<T>(text, params),
      run: (text: string, ...params: unknown[]) => db.run(text, params),
      close: () => db.pool.end(),
    };
  }
  const db = new Database(server.databasePath);
  return {
    all: async <T = Record<string, unknown>>(text: string, ...params: unknown[]) => db.prepare(text).all(...params) as T[],
    run: async (text: string, ...params: unknown[]) => db.prepare(text).run(...params).changes,
    close: async () => db.close(),
  };
}
