import type { OpenStoreOptions, StoreBackend } from './backend.ts';
import { databaseFilePath } from './backend.ts';
import { openSqliteBackend } from './sqlite-backend.ts';

/**
 * The backend `DATABASE_URL` names: an SQLite file (or `:memory:`), or a PostgreSQL server (`postgres://…`).
 * PostgreSQL's backend and its driver (`pg`) are loaded only when asked for: a server on SQLite never
 * pays for them at start (docs/decisions/server-start.md).
 */
export async function openStore(databaseUrl: string, options: OpenStoreOptions & { poolSize?: number }): Promise<StoreBackend> {
  const path = databaseFilePath(databaseUrl);
  if (path !== null) return openSqliteBackend(path, options);
  const { openPostgresBackend } = await import('./postgres/backend.ts');
  return openPostgresBackend(databaseUrl, options);
}
