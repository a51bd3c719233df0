import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { DOMAIN_STORE_RULES } from '../../server/domain/store-rules.ts';
import type { StoreBackend } from '../../server/store/backend.ts';
import { openStore } from '../../server/store/open.ts';
import { createTestDatabase } from './postgres.ts';

export type BackendKind = 'sqlite' | 'postgres';
export const BACKENDS: readonly BackendKind[] = ['sqlite', 'postgres'];

/** The backend the API, webhook and OAuth suites run on: `TEST_BACKEND=postgres` (the `postgres` project), else SQLite. */
export function testBackendKind(): BackendKind {
  return process.env.TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite';
}

/**
 * A DATABASE_URL of the kind asked for, empty and of this test's own: a file path under `dir` (or
 * `:memory:`) for SQLite, a fresh database on the run's PostgreSQL (test/setup/postgres-global.ts).
 */
export async function testDatabaseUrl(kind: BackendKind, sqlitePath = ':memory:'): Promise<string> {
  return kind === 'postgres' ? createTestDatabase(inject('postgresAdminUrl')) : sqlitePath;
}

/** A real, migrated, empty store of the kind asked for, through the same `openStore` the server uses. */
export async function openTestBackend(
  kind: BackendKind,
  secretBox = new SecretBox(randomBytes(32)),
): Promise<StoreBackend & { secretBox: SecretBox; url: string }> {
  const url = await testDatabaseUrl(kind);
  const backend = await openStore(url, { secretBox, synchronous: 'NORMAL', rules: DOMAIN_STORE_RULES });
  return Object.assign(backend, { secretBox, url });
}
