import type Database from 'better-sqlite3';

/**
 * A real write that tells whether the database takes writes now: one committed transaction that
 * inserts a row large enough to need fresh pages (a full disk, or a database at its page limit,
 * refuses it) and deletes it again, so the commit reaches the file (a read-only file, an I/O error
 * or a lock held past the busy timeout fail it). The row lives in `schema_migrations` under a
 * version no migration uses (-1) and never outlives the transaction, so no table is added for it.
 */
export function sqliteWriteProbe(db: Database.Database): () => void {
  let statements: { insert: Database.Statement; remove: Database.Statement } | undefined;
  return () => {
    statements ??= {
      insert: db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (-1, randomblob(2 * (SELECT page_size FROM pragma_page_size())), 'readiness probe')"),
      remove: db.prepare('DELETE FROM schema_migrations WHERE version = -1'),
    };
    const { insert, remove } = statements;
    db.transaction(() => {
      remove.run();
      insert.run();
      remove.run();
    }).immediate();
  };
}
