/**
 * Where a waiting request learns that its client went away: registers `cancel` and answers a
 * function that unregisters it. An `AbortSignal` does (see `signalGone`); so does Node's response
 * 'close' event, without the whole WHATWG Request an `AbortSignal` would make the HTTP layer build.
 */
export type Gone = (cancel: () => void) => () => void;

/** A `Gone` from an `AbortSignal`. */
export function signalGone(signal: AbortSignal): Gone {
  return (cancel) => {
    signal.addEventListener('abort', cancel, { once: true });
    return () => signal.removeEventListener('abort', cancel);
  };
}

/**
 * One held request: a single object with its timer, instead of a handful of closures per waiter
 * (a thousand held requests is the case this is measured on).
 */
class Waiter {
  readonly changed: Promise<boolean>;
  /** What the change was announced with (the changed record), so waiters need not read it again. */
  #announced: unknown;
  #settle!: (changed: boolean) => void;
  #timer: NodeJS.Timeout | undefined;
  #unregister: (() => void) | undefined;
  #done = false;

  readonly revisionId: string;
  readonly set: Set<Waiter>;
  readonly onDone: (waiter: Waiter) => void;

  constructor(revisionId: string, set: Set<Waiter>, onDone: (waiter: Waiter) => void) {
    this.revisionId = revisionId;
    this.set = set;
    this.onDone = onDone;
    this.changed = new Promise<boolean>((resolve) => (this.#settle = resolve));
  }

  start(timeoutMs: number, gone: Gone | undefined): void {
    this.#timer = setTimeout(() => this.finish(false), timeoutMs);
    if (gone) this.#unregister = gone(() => this.finish(false));
  }

  finish(changed: boolean, value?: unknown): void {
    if (this.#done) return;
    this.#done = true;
    if (changed) this.#announced = value;
    clearTimeout(this.#timer);
    this.#unregister?.();
    this.onDone(this);
    this.#settle(changed);
  }

  cancel(): void {
    this.finish(false);
  }

  value(): unknown {
    return this.#announced;
  }
}

/**
 * In-process notification of revision changes, for the conditional long-poll. Every status change
 * goes through the pipeline, which calls `notify`; a waiter costs one small object and one timer.
 */
export class RevisionWatch {
  readonly #waiters = new Map<string, Set<Waiter>>();

  /**
   * `changed` resolves `true` when the revision changes, `false` when `timeoutMs` passes or the
   * client is gone. `value()` is what the change was announced with, if anything (the changed
   * record), so a thousand waiters need not each read it again.
   */
  wait(revisionId: string, timeoutMs: number, gone?: Gone | AbortSignal): { changed: Promise<boolean>; cancel: () => void; value: () => unknown } {
    let set = this.#waiters.get(revisionId);
    if (!set) this.#waiters.set(revisionId, (set = new Set()));
    const waiter = new Waiter(revisionId, set, this.#removed);
    set.add(waiter);
    waiter.start(timeoutMs, gone instanceof AbortSignal ? signalGone(gone) : gone);
    return waiter;
  }

  readonly #removed = (waiter: Waiter): void => {
    const set = waiter.set;
    set.delete(waiter);
    if (set.size === 0 && this.#waiters.get(waiter.revisionId) === set) this.#waiters.delete(waiter.revisionId);
  };

  /** Wakes every waiter of `revisionId`, handing them `value` (the changed record) when given. */
  notify(revisionId: string, value?: unknown): void {
    const waiters = this.#waiters.get(revisionId);
    if (!waiters) return;
    // The set is emptied by the waiters themselves as they finish: take them all first.
    this.#waiters.delete(revisionId);
    for (const waiter of [...waiters]) waiter.finish(true, value);
  }

  /** How many requests are waiting (for tests and benchmarks). */
  get size(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }
}
