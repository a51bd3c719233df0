import { FORMER_POSTGRES_VERSIONS, MIGRATIONS, type Migration } from './migrations/index.ts';

/** The table of applied versions, the same on both databases. */
export const SCHEMA_MIGRATIONS_TABLE =
  'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)';

/**
 * A PostgreSQL database still numbered by PostgreSQL's former history: its first version made the
 * whole schema of its day, push-commit index included, which this history makes only at version
 * 14; so a database listing no version past 6 that has that index is one of those.
 */
export const FORMER_POSTGRES_HISTORY_CHECK = "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'revisions_one_push_per_commit'";

/**
 * The versions of this history a database of PostgreSQL's former history had made, as the rows to
 * record them under (the former rows are replaced in the same transaction).
 */
export function adoptedVersions(formerVersions: Iterable<number>): Array<[number, string, string]> {
  const last = Math.max(...[...formerVersions].map((version) => FORMER_POSTGRES_VERSIONS.get(version) ?? 0));
  const now = new Date().toISOString();
  return MIGRATIONS.filter((migration) => migration.version <= last).map((migration) => [
    migration.version,
    `${migration.name} (adopted from the former PostgreSQL history)`,
    now,
  ]);
}

/** The migrations a database that lists `applied` versions lacks, in order. */
export function pendingMigrations(applied: ReadonlySet<number>): Migration[] {
  return MIGRATIONS.filter((migration) => !applied.has(migration.version));
}

/** The row that records a migration as applied. */
export function appliedRow(migration: Migration): [number, string, string] {
  return [migration.version, migration.name, new Date().toISOString()];
}
