/**
 * In-process notification of revision changes, for the conditional long-poll. Every status change
 * goes through the pipeline, which calls `notify`; a waiter costs one closure and one timer.
 */
export class RevisionWatch {
  readonly #waiters = new Map<string, Set<() => void>>();

  /** Resolves `true` when the revision changes, `false` when `timeoutMs` passes or `signal` aborts. */
  wait(revisionId: string, timeoutMs: number, signal?: AbortSignal): { changed: Promise<boolean>; cancel: () => void } {
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
    const onChange = () => finish(true);
    const onAbort = () => finish(false);
    const timer = setTimeout(() => finish(false), timeoutMs);
    set.add(onChange);
    signal?.addEventListener('abort', onAbort, { once: true });
    return { changed, cancel: () => finish(false) };
  }

  notify(revisionId: string): void {
    const waiters = this.#waiters.get(revisionId);
    if (!waiters) return;
    for (const wake of [...waiters]) wake();
  }

  /** How many requests are waiting (for tests and benchmarks). */
  get size(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }
}
