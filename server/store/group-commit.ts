import type Database from 'better-sqlite3';

type Entry = { work: () => void; resolve: () => void; reject: (error: unknown) => void };

/** Thrown inside the together-pass to roll its transaction back: one write failed, the group is redone one savepoint per write. */
class RedoOneByOne extends Error {}

/**
 * Group commit for SQLite: writes asked for in the same turn of the event loop are applied in one
 * transaction and acknowledged once that transaction has committed. With `synchronous=FULL` every
 * commit waits for the disk (an fsync), and SQLite's writes hold the event loop while they wait;
 * concurrent creates that arrived together now share one wait instead of queueing behind one each.
 *
 * Each write keeps its own outcome: one that fails (a name already taken) is rolled back alone
 * while the others commit. The group first runs with no savepoint per write: a savepoint makes
 * SQLite copy every page a write touches into its sub-journal first (~53 pages and ~55,000
 * instructions a create, with `temp_store = MEMORY`: docs/decisions/hot-paths-round-9-create.md),
 * which only a failing write needs. When one fails, that transaction is rolled back whole and the
 * group is run again with a savepoint per write, each failure rolled back to its own: so a write
 * must be one that can run twice (its first run's changes are gone when it does). When SQLite
 * abandons the whole transaction (a full disk or an I/O error may do that) or the commit fails,
 * every write of the group is rejected and none is stored: nothing is acknowledged that was not
 * committed.
 */
export class GroupCommit {
  readonly #db: Database.Database;
  #pending: Entry[] = [];
  // The transactions, made once: `db.transaction(fn)` builds its wrapper functions anew on every call.
  /** A write alone: its own transaction, as without grouping; called inside a transaction, a savepoint of it. */
  readonly #alone: (work: () => void) => void;
  /** The group in one transaction, no savepoints; throws `RedoOneByOne` (rolled back) when a write fails. */
  readonly #together: (group: Entry[]) => void;
  /**
   * The group again, each write in a savepoint of its own (`#alone`, nested: rolled back alone
   * when it throws; its error goes in `failures`); throws the error SQLite abandoned the whole
   * transaction with, if it did (what ran before is gone too).
   */
  readonly #oneByOne: (group: Entry[], failures: Map<Entry, unknown>) => void;

  constructor(db: Database.Database) {
    this.#db = db;
    this.#alone = db.transaction((work: () => void) => work());
    this.#together = db.transaction((group: Entry[]) => {
      for (const entry of group) {
        try {
          entry.work();
        } catch (error) {
          if (!db.inTransaction) throw error;
          throw new RedoOneByOne();
        }
      }
    });
    this.#oneByOne = db.transaction((group: Entry[], failures: Map<Entry, unknown>) => {
      for (const entry of group) {
        try {
          this.#alone(entry.work);
        } catch (error) {
          if (!db.inTransaction) throw error;
          failures.set(entry, error);
        }
      }
    });
  }

  /**
   * Runs `work` (synchronous SQL, in the transaction this gives it: it opens none of its own) in the
   * next group; resolves once committed. `work` may run twice (see above).
   */
  run(work: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#pending.push({ work, resolve, reject });
      if (this.#pending.length === 1) setImmediate(() => this.#commit());
    });
  }

  #commit(): void {
    // An asynchronous transaction of the same connection is open (it spans awaits): committing now
    // would nest this group inside it. It ends within the turn; the group waits for the next one.
    if (this.#db.inTransaction) {
      setImmediate(() => this.#commit());
      return;
    }
    const group = this.#pending;
    this.#pending = [];
    if (group.length === 1) {
      const [only] = group;
      try {
        this.#alone(only!.work);
        only!.resolve();
      } catch (error) {
        only!.reject(error);
      }
      return;
    }
    const failures = new Map<Entry, unknown>();
    let abandoned: unknown;
    try {
      this.#together(group);
    } catch (error) {
      if (error instanceof RedoOneByOne) {
        try {
          this.#oneByOne(group, failures);
        } catch (again) {
          abandoned = again;
        }
      } else abandoned = error;
    }
    for (const entry of group) {
      if (abandoned !== undefined) entry.reject(abandoned);
      else if (failures.has(entry)) entry.reject(failures.get(entry));
      else entry.resolve();
    }
  }
}
