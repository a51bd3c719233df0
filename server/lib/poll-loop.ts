export type PollLoopOptions = {
  pass: () => Promise<void>;
  intervalMs: number;
  onError: (error: unknown) => void;
  /** Whether this process runs the pass now (one process at a time on one database); absent: always. */
  lead?: () => Promise<boolean>;
  /** When the first pass runs after `start` (at once by default). */
  firstDelayMs?: number;
};

/**
 * A pass run again and again, `intervalMs` after the previous one ended (never two at once),
 * until stopped: the shape of every outbox sender and sweeper. A pass runs only in the process
 * that leads it; a failed pass is reported and the loop goes on. Its timer never keeps the process
 * alive.
 */
export class PollLoop {
  readonly #options: PollLoopOptions;
  #timer: NodeJS.Timeout | null = null;
  #stopped = true;

  constructor(options: PollLoopOptions) {
    this.#options = options;
  }

  /** Whether `stop` was called (or `start` never was): a pass in progress checks it to end early. */
  get stopped(): boolean {
    return this.#stopped;
  }

  start(): void {
    this.#stopped = false;
    this.#schedule(this.#options.firstDelayMs ?? 0);
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  async #leadAndPass(): Promise<void> {
    const { lead, pass } = this.#options;
    if (lead && !(await lead())) return;
    await pass();
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#leadAndPass()
        .catch(this.#options.onError)
        .finally(() => this.#schedule(this.#options.intervalMs));
    }, delayMs);
    this.#timer.unref();
  }
}

/**
 * A worker whose pass runs on a `PollLoop`: a sender of an outbox is a pass over what is due, and
 * this is its start, stop and leading, written once.
 */
export abstract class PolledWorker {
  readonly #loop: PollLoop;

  constructor(options: Omit<PollLoopOptions, 'pass'>) {
    this.#loop = new PollLoop({ ...options, pass: () => this.pass() });
  }

  start(): void {
    this.#loop.start();
  }

  stop(): void {
    this.#loop.stop();
  }

  /** Whether the worker was stopped: a pass in progress ends early. */
  protected get stopped(): boolean {
    return this.#loop.stopped;
  }

  /** One pass over what is due, in the process that leads. */
  protected abstract pass(): Promise<void>;
}

/**
 * A sweep (of expired, stale or idle things) every `everyMs`, the first one interval after `start`
 * unless `atStart`; `onRemoved` hears how many it removed when that is any. Sweeps never overlap.
 */
export function sweepLoop(options: {
  sweep: () => Promise<number>;
  everyMs: number;
  atStart?: boolean;
  lead?: () => Promise<boolean>;
  onRemoved?: (removed: number) => void;
  onError: (error: unknown) => void;
}): PollLoop {
  return new PollLoop({
    pass: async () => {
      const removed = await options.sweep();
      if (removed > 0) options.onRemoved?.(removed);
    },
    intervalMs: options.everyMs,
    firstDelayMs: options.atStart ? 0 : options.everyMs,
    lead: options.lead,
    onError: options.onError,
  });
}
