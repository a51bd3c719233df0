import type { Db, Params, Row } from './db.ts';
import { NO_RULES, type Refusal, type StoreRules } from './rules.ts';

/**
 * What every store written on the one database interface starts from: the database it runs on,
 * and the domain's rules for the writes it refuses (`NO_RULES` when opened without them).
 */
export abstract class SqlStore {
  protected readonly sql: Db;
  protected readonly rules: StoreRules;

  constructor(db: Db, rules: StoreRules = NO_RULES) {
    this.sql = db;
    this.rules = rules;
  }

  /** The first row `sql` reads, as `map` makes it; null when there is none. */
  protected async first<T>(map: (row: Row) => T, sql: string, params?: Params): Promise<T | null> {
    const row = await this.sql.row(sql, params);
    return row ? map(row) : null;
  }

  /** Runs `write`; a unique-key violation it hits is thrown as `refusal`, in the domain's words. */
  protected async refusingDuplicate<T>(refusal: Refusal, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      if (this.sql.dialect.isUniqueViolation(error)) throw this.rules.refusal(refusal);
      throw error;
    }
  }
}
