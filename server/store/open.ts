import type { OpenStoreOptions, StoreBackend } from './backend.ts';
import { databaseFilePath } from './backend.ts';
import { openSqliteBackend } from './sqlite-backend.ts';
import { StartupError } from '../startup-errors.ts';

/** The backend `DATABASE_URL` names: an SQLite file (or `:memory:`), or a PostgreSQL server. */
export async function openStore(databaseUrl: string, options: OpenStoreOptions): Promise<StoreBackend> {
  const path = databaseFilePath(databaseUrl);
  if (path === null) throw new StartupError('PostgreSQL support is incomplete in this version: set DATABASE_URL to an SQLite file path.');
  return openSqliteBackend(path, options);
}

