import type { Logger } from '../logger.ts';
import type { RevisionLeaseStore, WorkLease } from '../store/types.ts';

/** Revisions (and teardowns) one sweep statement takes over at most; a sweep repeats it while it fills. */
export const SWEEP_BATCH = 100;
/**
 * Revisions held (or teardown leases renewed) per statement. A process's revisions are covered by
 * its one process lease, so they are written only when started here (to name this process: a
 * create names it in its own write, other starts at the next renewal) and after that lease lapsed
 * (to find which are still its own); SQLite's writes hold the event loop,
 * and one UPDATE over 20,000 revisions stops every request for ~180 ms (measured with the paced
 * benchmark, which holds its revisions at BUILDING). In batches, with other work let in between,
 * no such statement holds the loop for more than a few milliseconds.
 */
const RENEW_BATCH = 500;

/**
 * The started revisions this process handed to a data plane, and the one process lease that
 * covers them all (docs/decisions/work-leases.md): which of them still have to name this process,
 * which it gives up, and which another process took over while this one stalled.
 */
export class RunningRevisions {
  readonly #store: RevisionLeaseStore;
  readonly #processId: string;
  readonly #log: Logger;
  /** Started revisions this process handed to a data plane: its process lease covers them until they end. */
  readonly #running = new Set<string>();
  /** Those of `#running` started here that do not name this process yet: the next renewal holds them. */
  readonly #unheld = new Set<string>();
  /** Revisions whose hand-over failed: the next renewal gives them up, for a sweep to take over. */
  readonly #toRelease = new Set<string>();
  /** Renewals left that re-check every revision in `#running` (after the process lease lapsed). */
  #recheck = 0;
  /** Whether this process has had a lease: a renewal that finds none after that is a lapse (the first finds none too). */
  #leased = false;

  constructor(deps: { store: RevisionLeaseStore; processId: string; log: Logger }) {
    this.#store = deps.store;
    this.#processId = deps.processId;
    this.#log = deps.log;
  }

  /**
   * Covered by the process lease from now on. One started here that its own write did not name
   * (a PATCH's, a push's, a create's while the lease had lapsed) names this process from the next renewal.
   */
  add(revisionId: string, holder: 'held' | 'started here'): void {
    this.#running.add(revisionId);
    if (holder === 'started here') this.#unheld.add(revisionId);
  }

  /**
   * A sweep took this revision over: true when it is still being driven here (started here and not
   * held yet, after a stall longer than the lease), and now names this process again.
   */
  retaken(revisionId: string): boolean {
    if (!this.#running.has(revisionId)) return false;
    this.#unheld.delete(revisionId);
    return true;
  }

  /** Ended, or found gone: no longer this process's. */
  ended(revisionId: string): void {
    this.#running.delete(revisionId);
    this.#unheld.delete(revisionId);
  }

  /** Its hand-over failed: given up at the next renewal, for a sweep to take it over once stale. */
  handOverFailed(revisionId: string): void {
    this.ended(revisionId);
    this.#toRelease.add(revisionId);
  }

  /**
   * Renews the process lease, which covers every revision this process holds (one row write however
   * many); the revisions started here since the last renewal are named as this process's. When the
   * lease had lapsed (a stall longer than a lease), every revision is checked: those another
   * process took over meanwhile are dropped. The check is repeated at the next renewal too, so a
   * take-over that was being written during the first check is seen by the second.
   */
  async renew(lease: WorkLease): Promise<void> {
    const lapsed = !(await this.#store.renewProcessLease(lease)) && this.#leased;
    if (lapsed) this.#recheck = 2;
    this.#leased = true;
    const toHold = this.#recheck > 0 ? [...this.#running] : [...this.#unheld];
    let dropped = 0;
    await inBatches(toHold, async (batch) => {
      const held = new Set(await this.#store.holdRevisions(batch, this.#processId));
      for (const id of batch) {
        this.#unheld.delete(id);
        // Ended (perhaps through another process) or taken over after a stall: no longer this process's.
        if (!held.has(id) && this.#running.delete(id)) dropped += 1;
      }
    });
    if (this.#recheck > 0) this.#recheck -= 1;
    if (lapsed) {
      // The first of the two checks; the second finds what a take-over being written during it took.
      this.#log.warn(
        "pipeline: this process's lease had lapsed (it stalled for longer than PIPELINE_LEASE_MS); revisions another process took over meanwhile are its now",
        {
          revisions_dropped: dropped,
          revisions_kept: this.#running.size,
        },
      );
    }
    if (this.#toRelease.size > 0) {
      const released = [...this.#toRelease];
      await this.#store.releaseRevisions(released, this.#processId);
      for (const id of released) this.#toRelease.delete(id);
    }
  }

  /** On a clean shutdown: names the revisions not held yet, then ends the process lease `now`, so the ended lease covers them too. */
  async end(now: string): Promise<void> {
    await inBatches([...this.#unheld], (batch) => this.#store.holdRevisions(batch, this.#processId));
    await this.#store.endProcessLease(this.#processId, now);
  }
}

/** Runs `each` over `ids` in slices of `RENEW_BATCH`, letting waiting requests in between slices. */
export async function inBatches(ids: string[], each: (batch: string[]) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < ids.length; start += RENEW_BATCH) {
    if (start > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    await each(ids.slice(start, start + RENEW_BATCH));
  }
}
