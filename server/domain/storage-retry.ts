import type { Logger } from '../logger.ts';
import type { Readiness } from './readiness.ts';
import { asStorageUnavailable } from './storage-unavailable.ts';

/** Waits between attempts of a write the storage refused: doubling from the first, up to the last. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5000;

/** Thrown into pipeline work that was waiting for the storage when the pipeline stopped. */
export class PipelineStopped extends Error {
  override readonly name = 'PipelineStopped';
}

/**
 * How the pipeline's work outlives a storage that refuses writes (disk full, I/O error): retried
 * with backoff until it takes them again, `/readyz` told meanwhile, and every wait ended by `stop()`.
 * Periodic work (`background`) is skipped while its last run still goes, and its failures logged.
 */
export class StorageRetry {
  readonly #log: Logger;
  readonly #readiness: Readiness | undefined;
  /** Waits of work retrying a refused write; stop() ends them. */
  readonly #waits = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();
  /** Periodic work still running (see `background`). */
  readonly #busy = new Set<string>();
  #stopped = false;

  constructor(deps: { log: Logger; readiness?: Readiness }) {
    this.#log = deps.log;
    this.#readiness = deps.readiness;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Runs `work` once now; when the storage refuses it, again in the background until it works. */
  async nowOrLater(what: string, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      if (!asStorageUnavailable(error)) throw error;
      this.#noteFailure(error, what);
      void this.retrying(what, work, { waitFirst: true }).catch((retryError: unknown) => {
        if (!(retryError instanceof PipelineStopped)) this.#log.error(`pipeline: could not ${what}`, { error: String(retryError) });
      });
    }
  }

  /**
   * Runs `work` until it does not fail on storage: the waits double from 100 ms to 5 s. Other
   * errors are thrown at once; so is `PipelineStopped` when the pipeline stops meanwhile.
   */
  async retrying<T>(what: string, work: () => Promise<T>, options: { waitFirst?: boolean } = {}): Promise<T> {
    let wait = RETRY_FIRST_MS;
    let failures = 0;
    if (options.waitFirst) {
      await this.#sleep(wait);
      wait = Math.min(wait * 2, RETRY_MAX_MS);
    }
    for (;;) {
      if (this.#stopped) throw new PipelineStopped('The pipeline stopped.');
      try {
        const result = await work();
        if (failures > 0) this.#log.info('pipeline: the storage takes writes again', { what, failed_attempts: failures });
        return result;
      } catch (error) {
        if (!asStorageUnavailable(error)) throw error;
        // Said once per stretch of failures, not once per attempt.
        if (failures === 0) this.#noteFailure(error, what);
        else this.#readiness?.storageFailed(asStorageUnavailable(error)!.message);
        failures += 1;
      }
      await this.#sleep(wait);
      wait = Math.min(wait * 2, RETRY_MAX_MS);
    }
  }

  /**
   * Runs periodic work; a failure (the storage refusing) is logged, and the next period tries again.
   * A period that comes while the last one's work still runs (a slow database) is skipped.
   */
  async background(what: string, work: () => Promise<void>): Promise<void> {
    if (this.#stopped || this.#busy.has(what)) return;
    this.#busy.add(what);
    try {
      await work();
    } catch (error) {
      if (this.#stopped) return;
      if (asStorageUnavailable(error)) this.#noteFailure(error, what);
      else this.#log.error(`pipeline: could not ${what}`, { error: String(error) });
    } finally {
      this.#busy.delete(what);
    }
  }

  /** Ends every wait: the work waiting is thrown `PipelineStopped`, and no new attempt starts. */
  stop(): void {
    this.#stopped = true;
    for (const entry of this.#waits) {
      clearTimeout(entry.timer);
      entry.wake();
    }
    this.#waits.clear();
  }

  #noteFailure(error: unknown, what: string): void {
    const problem = asStorageUnavailable(error)?.message ?? String(error);
    this.#readiness?.storageFailed(problem);
    this.#log.warn('pipeline: the storage refused a write; retrying with backoff until it works again', { what, problem });
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const entry = {
        timer: setTimeout(() => {
          this.#waits.delete(entry);
          resolve();
        }, ms),
        wake: resolve,
      };
      this.#waits.add(entry);
    });
  }
}
