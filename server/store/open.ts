import type { OpenStoreOptions, StoreBackend } from './backend.ts';
import { databaseFilePath } from './backend.ts';
import { openPostgresBackend } from './postgres/backend.ts';
import { openSqliteBackend } from './sqlite-backend.ts';

/** The backend `DATABASE_URL` names: an SQLite file (or `:memory:`), or a PostgreSQL server (`postgres://…`). */
export async function openStore(databaseUrl: string, options: OpenStoreOptions & { poolSize?: number }): Promise<StoreBackend> {
  const path = databaseFilePath(databaseUrl);
  return path === null ? openPostgresBackend(databaseUrl, options) : openSqliteBackend(path, options);
}
