import { RevisionWatch } from '../lib/revision-watch.ts';
import type { Coordination } from '../store/coordination.ts';

/**
 * A `RevisionWatch` whose wake-ups reach every process on the database. `notify` wakes this
 * process's waiters with the changed record, as a local watch does, and publishes the id on `topic`; a
 * notice from another process wakes the waiters here with no record, so each of them reads the
 * database again (the revision long-poll, the agents' claim and the OAuth wait all do when
 * `value()` is undefined). On a resync (notices may have been missed) every waiter here is woken to
 * read again. It extends the watch rather than changing it: the waiting itself stays the watch's.
 *
 * On SQLite (`coordination.shared` is false) it is the plain watch: nothing is published or counted.
 */
export class SharedWatch extends RevisionWatch {
  readonly #coordination: Coordination;
  readonly #topic: string;
  /** Ids that have waiters here, with how many: what a resync wakes. Kept only when shared. */
  readonly #waited = new Map<string, number>();
  readonly #detach: Array<() => void> = [];

  constructor(coordination: Coordination, topic: string) {
    super();
    this.#coordination = coordination;
    this.#topic = topic;
    if (!coordination.shared) return;
    this.#detach.push(
      coordination.subscribe(topic, (id) => super.notify(id)),
      coordination.onResync(() => {
        for (const id of [...this.#waited.keys()]) super.notify(id);
      }),
    );
  }

  // The base class's own signatures, whatever they become: these only count the ids waited on.
  override wait(...args: Parameters<RevisionWatch['wait']>): ReturnType<RevisionWatch['wait']> {
    const waiter = super.wait(...args);
    if (this.#coordination.shared) {
      const counted = this.#counted(args[0]);
      void waiter.changed.then(counted);
    }
    return waiter;
  }

  override waitThen(...args: Parameters<RevisionWatch['waitThen']>): ReturnType<RevisionWatch['waitThen']> {
    if (!this.#coordination.shared) return super.waitThen(...args);
    const [id, timeoutMs, gone, settled] = args;
    const counted = this.#counted(id);
    return super.waitThen(id, timeoutMs, gone, (changed, value) => {
      counted();
      settled(changed, value);
    });
  }

  /** Counts a waiter of `id`; the function answered uncounts it when its wait ends. */
  #counted(id: string): () => void {
    this.#waited.set(id, (this.#waited.get(id) ?? 0) + 1);
    return () => {
      const left = (this.#waited.get(id) ?? 1) - 1;
      if (left <= 0) this.#waited.delete(id);
      else this.#waited.set(id, left);
    };
  }

  /** Wakes this process's waiters of `id` (with `value`) and tells the other processes. */
  override notify(id: string, value?: unknown): void {
    super.notify(id, value);
    // Fire and forget: the change is stored; a notice that cannot be sent is logged by the coordination.
    if (this.#coordination.shared) void this.#coordination.publish(this.#topic, id);
  }

  /** Stops hearing other processes (the control plane stops). */
  detach(): void {
    for (const stop of this.#detach.splice(0)) stop();
  }
}
