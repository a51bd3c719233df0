/**
 * In-process notification of revision changes, for the conditional long-poll. Every status change
 * goes through the pipeline, which calls `notify`; a waiter costs one closure and one timer.
 */
export class RevisionWatch {
  readonly #waiters = new Map<string, Set<(value: unknown) => void>>();

  /**
   * Resolves `true` when the revision changes, `false` when `timeoutMs` passes or `signal` aborts.
   * `value()` is what the change was announced with, if anything (the changed record), so a
   * thousand waiters need not each read it again.
   */
  wait(revisionId: string, timeoutMs: number, signal?: AbortSignal): { changed: Promise<boolean>; cancel: () => void; value: () => unknown } {
    let announced: unknown;
    let settle!: (changed: boolean) => void;
    const changed = new Promise<boolean>((resolve) => (settle = resolve));
    let waiters = this.#waiters.get(revisionId);
    if (!waiters) this.#waiters.set(revisionId, (waiters = new Set()));
    const set = waiters;
    const finish = (value: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      set.delete(onChange);
      if (set.size === 0 && this.#waiters.get(revisionId) === set) this.#waiters.delete(revisionId);
      settle(value);
    };
    const onChange = (value: unknown) => {
      announced = value;
      finish(true);
    };
    const onAbort = () => finish(false);
    const timer = setTimeout(() => finish(false), timeoutMs);
    set.add(onChange);
    signal?.addEventListener('abort', onAbort, { once: true });
    return { changed, cancel: () => finish(false), value: () => announced };
  }

  /** Wakes every waiter of `revisionId`, handing them `value` (the changed record) when given. */
  notify(revisionId: string, value?: unknown): void {
    const waiters = this.#waiters.get(revisionId);
    if (!waiters) return;
    for (const wake of [...waiters]) wake(value);
  }

  /** How many requests are waiting (for tests and benchmarks). */
  get size(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }
}
