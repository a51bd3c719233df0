/**
 * A shared allowance of bytes held in memory at once (bodies being received before they can be
 * authenticated). Each request takes from it through its own lease, and the lease gives all of it
 * back when the request ends, however it ends.
 */
export class ByteBudget {
  readonly limit: number;
  #used = 0;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Bytes taken by leases not yet released. */
  get used(): number {
    return this.#used;
  }

  lease(): BudgetLease {
    let held = 0;
    return {
      take: (bytes) => {
        if (this.#used + bytes > this.limit) return false;
        this.#used += bytes;
        held += bytes;
        return true;
      },
      release: () => {
        this.#used -= held;
        held = 0;
      },
    };
  }
}

/** One request's share of a `ByteBudget`. */
export type BudgetLease = {
  /** Takes `bytes` more; false (and nothing taken) when the budget cannot spare them. */
  take(bytes: number): boolean;
  /** Gives back everything this lease took. */
  release(): void;
};
