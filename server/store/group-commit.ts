import type Database from 'better-sqlite3';

type Entry = { work: () => void; resolve: () => void; reject: (error: unknown) => void };

/**
 * Group commit for SQLite: writes asked for in the same turn of the event loop are applied in one
 * transaction, each in a savepoint of its own, and acknowledged once that transaction has
 * committed. With `synchronous=FULL` every commit waits for the disk (an fsync), and SQLite's
 * writes hold the event loop while they wait; concurrent creates that arrived together now share
 * one wait instead of queueing behind one each.
 *
 * Each write keeps its own outcome: one that fails (a name already taken) is rolled back to its
 * savepoint and rejected with its own error while the others commit. When SQLite abandons the whole
 * transaction (a full disk or an I/O error may do that) or the commit fails, every write of the
 * group is rejected and none is stored: nothing is acknowledged that was not committed.
 */
export class GroupCommit {
  readonly #db: Database.Database;
  #pending: Entry[] = [];
  /**
   * The group's transaction, made once: `db.transaction(fn)` builds its wrapper functions anew on
   * every call. Runs each entry in a savepoint of its own (a nested `db.transaction`, rolled back
   * alone when it throws: its error goes in `failures`); throws the error SQLite abandoned the whole
   * transaction with, if it did (what ran before is gone too).
   */
  readonly #commitGroup: (group: Entry[], failures: Map<Entry, unknown>) => void;

  constructor(db: Database.Database) {
    this.#db = db;
    this.#commitGroup = db.transaction((group: Entry[], failures: Map<Entry, unknown>) => {
      for (const entry of group) {
        try {
          entry.work();
        } catch (error) {
          if (!db.inTransaction) throw error;
          failures.set(entry, error);
        }
      }
    });
  }

  /** Runs `work` (synchronous SQL, itself a `db.transaction`) in the next group; resolves once committed. */
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
      // Alone: its own transaction, as without grouping.
      const [only] = group;
      try {
        only!.work();
        only!.resolve();
      } catch (error) {
        only!.reject(error);
      }
      return;
    }
    const failures = new Map<Entry, unknown>();
    let abandoned: unknown;
    try {
      this.#commitGroup(group, failures);
    } catch (error) {
      abandoned = error;
    }
    for (const entry of group) {
      if (abandoned !== undefined) entry.reject(abandoned);
      else if (failures.has(entry)) entry.reject(failures.get(entry));
      else entry.resolve();
    }
  }
}
