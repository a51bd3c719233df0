import Database from 'better-sqlite3';
import type { SecretBox } from '../crypto/secret-box.ts';
import { type AuditEntry, currentTraceparent, pendingAudit } from '../lib/request-scope.ts';
import { composeStore, coreStores, SqlStoreHealth } from './core.ts';
import { createRefused, createStatements, SqlDeploymentStore } from './deployments.ts';
import { sqliteDialect } from './dialect.ts';
import { GroupCommit } from './group-commit.ts';
import { appliedRow, pendingMigrations, SCHEMA_MIGRATIONS_TABLE } from './migrate.ts';
import { TERMINAL } from './queries/statuses.ts';
import type { StoreRules } from './rules.ts';
import { SqliteDb } from './sqlite/db.ts';
import type { CreatedDeployment, NewDeployment, Store } from './types.ts';

export type SqliteOptions = {
  /** A file path, or `:memory:`. */
  path: string;
  secretBox: SecretBox;
  /** `FULL` (default) makes every acknowledged write survive a power loss, not only a crash. */
  synchronous?: 'FULL' | 'NORMAL';
  /** The domain's decisions and words (`server/domain/store-rules.ts`). */
  rules?: StoreRules;
};

/** Opens the database, applies pragmas and pending migrations, and expires what a previous run left. */
export function openSqliteStore(options: SqliteOptions): SqliteStore {
  const db = new Database(options.path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  db.pragma('cache_size = -16000');
  db.pragma('temp_store = MEMORY');
  migrate(db);
  expireLeftLeases(db);
  const adapter = new SqliteDb(db);
  const stores = coreStores(adapter, options.secretBox, options.rules, {
    health: new SqlStoreHealth(adapter, () => db.close()),
    deployments: new SqliteDeploymentStore(adapter, options.secretBox, options.rules),
  });
  return Object.assign(composeStore(stores), { db, adapter });
}

/**
 * Applies pending migrations of the one history (`migrations/`), all in one transaction: one commit
 * (one fsync at synchronous=FULL) instead of one per migration, most of a new database's start.
 */
function migrate(db: Database.Database): void {
  db.exec(SCHEMA_MIGRATIONS_TABLE);
  const applied = new Set((db.prepare('SELECT version FROM schema_migrations').all() as Array<{ version: number }>).map((r) => r.version));
  const pending = pendingMigrations(applied);
  if (pending.length === 0) return;
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  db.transaction(() => {
    for (const migration of pending) {
      db.exec(migration.sql(sqliteDialect.schema));
      record.run(...appliedRow(migration));
    }
  })();
}

/** A time before every lease: what a lease left by a previous run is set to. */
const LONG_AGO = '1970-01-01T00:00:00.000Z';
/** The owner named on revisions a previous run started but never held (a process id is random hex). */
const PREVIOUS_RUN = 'previous-run';

/**
 * SQLite is one server process (contract §10): every lease found in the file when it is opened was
 * left by a run that has ended, so it is expired here and the start's sweep resumes that work at
 * once instead of waiting for the leases to run out.
 */
function expireLeftLeases(db: Database.Database): void {
  db.transaction(() => {
    // Every process lease is a previous run's; revisions it started but never held are named after
    // that run too, so the start's sweep takes them at once instead of a lease later.
    db.prepare('UPDATE process_leases SET lease_expires_at = ?').run(LONG_AGO);
    const unheld = db
      .prepare(`UPDATE revisions SET runner_id = ? WHERE runner_id IS NULL AND status NOT IN (${TERMINAL}) AND status <> 'QUEUED'`)
      .run(PREVIOUS_RUN);
    if (unheld.changes > 0) db.prepare('INSERT OR REPLACE INTO process_leases (process_id, lease_expires_at) VALUES (?, ?)').run(PREVIOUS_RUN, LONG_AGO);
    db.prepare("UPDATE deployments SET teardown_lease_expires_at = ? WHERE status = 'AWAITING_DELETE' AND teardown_owner IS NOT NULL").run(LONG_AGO);
    db.prepare("UPDATE webhook_deliveries SET claimed_by = NULL, claim_expires_at = NULL WHERE status = 'pending' AND claim_expires_at IS NOT NULL").run();
    db.prepare("UPDATE uploads SET receive_lease_expires_at = ? WHERE state = 'receiving'").run(LONG_AGO);
  })();
}

/** The core store on SQLite, with its connection for SQLite-only tools and tests that look at the rows. */
export type SqliteStore = Store & {
  /** The connection itself. */
  readonly db: Database.Database;
  /** The adapter every store of this database shares. */
  readonly adapter: SqliteDb;
};

/**
 * Deployments on SQLite, with the one write SQLite needs its own path for: creates that arrive
 * together share one commit (`GroupCommit`), each a synchronous function run in its group's transaction, since
 * with `synchronous=FULL` every commit waits for the disk while holding the event loop. The rows a
 * create writes are the shared `createStatements`; only how they are committed differs.
 */
class SqliteDeploymentStore extends SqlDeploymentStore {
  readonly #creates: GroupCommit;
  /** A create's writes, run in the transaction its group gives them (`GroupCommit`); may run twice. */
  readonly #createWrites: (input: NewDeployment, audit: AuditEntry | undefined) => boolean;

  constructor(sql: SqliteDb, box: SecretBox, rules?: StoreRules) {
    super(sql, box, rules);
    this.#creates = new GroupCommit(sql.raw);
    this.#createWrites = (input: NewDeployment, audit: AuditEntry | undefined) => {
      const statements = createStatements(this.hot, this.box, input);
      let held = false;
      for (const statement of statements) {
        const bound = sql.statement(statement.sql);
        const params = Array.isArray(statement.params) ? statement.params : [statement.params];
        if (statement === statements.revision) held = (bound.get(...params) as { runner_id: string | null }).runner_id !== null;
        else bound.run(...params);
      }
      if (audit) sql.writeAudit(audit);
      return held;
    };
  }

  override async createDeployment(input: NewDeployment): Promise<CreatedDeployment> {
    let revisionHeld = false;
    // Taken now, in the request's context: the group commits in whichever request's turn came first.
    const audit = pendingAudit();
    const traceparent = currentTraceparent();
    const taken = traceparent && input.revision ? { ...input, revision: { ...input.revision, traceparent } } : input;
    if (audit) audit.state = 'writing';
    try {
      await this.#creates.run(() => {
        revisionHeld = this.#createWrites(taken, audit?.entry);
      });
      if (audit) audit.state = 'written';
    } catch (error) {
      if (audit) audit.state = 'pending';
      throw createRefused(this.sql.dialect, this.rules, input, error);
    }
    return { deployment: { ...input.deployment, delete_tracing_project: false }, revisionHeld };
  }
}
