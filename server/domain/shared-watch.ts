import { RevisionWatch } from '../lib/revision-watch.ts';
import type { Coordination } from '../store/coordination.ts';

/**
 * A `RevisionWatch` whose wake-ups reach every process on the database. `notify` wakes this
 * process's waiters with the changed record, as a local watch does, and publishes the id on `topic`; a
 * notice from another process wakes the waiters here with no record, so they read the database
 * again (the revision long-poll, the agents' claim and the OAuth wait all do when `value()` is
 * undefined; the long-poll's waiters of one revision woken together share one read,
 * `Revisions.reread`). On a resync (notices may have been missed) every waiter here is woken to
 * read again. It extends the watch rather than changing it: the waiting itself stays the watch's,
 * which knows the ids waited on here (`waitedIds`), so a waiter costs nothing more when shared.
 *
 * On SQLite (`coordination.shared` is false) it is the plain watch: nothing is published.
 */
export class SharedWatch extends RevisionWatch {
  readonly #coordination: Coordination;
  readonly #topic: string;
  readonly #detach: Array<() => void> = [];

  constructor(coordination: Coordination, topic: string) {
    super();
    this.#coordination = coordination;
    this.#topic = topic;
    if (!coordination.shared) return;
    this.#detach.push(
      coordination.subscribe(topic, (id) => super.notify(id)),
      coordination.onResync(() => {
        for (const id of this.waitedIds()) super.notify(id);
      }),
    );
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
