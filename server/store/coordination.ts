/**
 * What one server process tells the others that share its database: "the thing named
 * `key` of kind `topic` changed" (a revision, a listener's work, an OAuth flow, an API key…), and
 * who runs the singletons (the reconciler). The local calls (waking this process's waiters, dropping
 * this process's cache entries) still happen where the change is made; this only carries the news to
 * the other processes. Keys are ids, never secrets: they travel through the database in clear.
 */
export interface Coordination {
  /** False for the one-process backend (SQLite): nothing is ever published or received. */
  readonly shared: boolean;

  /**
   * Whether notices from the other processes reach this one now (the listening connection is up).
   * While false, what is cached may change unheard: callers should not cache.
   */
  readonly listening: boolean;

  /**
   * Tells the other processes that `key` of `topic` changed. Never throws and never fails the
   * caller: the change is already stored; a lost notice is logged and covered by the receivers'
   * resync. Resolves once it is sent (or given up on).
   */
  publish(topic: string, key: string): Promise<void>;

  /**
   * Like `publish`, and resolves only once every other process listening on the database has run
   * its handlers for it (true), or when `timeoutMs` passes first (false: logged; a process that
   * stays silent that long is dead or cut off, and its resync covers it). For changes whose effect
   * must hold on the caller's very next request to any process (a revoked API key).
   */
  publishAcknowledged(topic: string, key: string, timeoutMs?: number): Promise<boolean>;

  /** Runs `handler` for each notice of `topic` from another process; answers an unsubscribe. */
  subscribe(topic: string, handler: (key: string) => void): () => void;

  /**
   * Runs `handler` when notices may have been missed (the listening connection was lost, and again
   * once it is back): drop caches, wake waiters so they read the database again.
   */
  onResync(handler: () => void): () => void;

  /**
   * Whether this process runs the singleton `name` now: takes the leadership when it is free, keeps
   * it while this process lives and its listening connection holds. Never throws (false on error).
   */
  tryLead(name: string): Promise<boolean>;

  /**
   * Runs `work` while no other process runs work under the same `name` (waiting up to `waitMs` for
   * it; after that, or when the lock cannot be had, `work` runs anyway: this avoids duplicate work,
   * it is not what correctness rests on). Exclusive between processes only: within one process the
   * lock is re-entrant, so the caller keeps its own one-at-a-time. On SQLite it just runs `work`.
   */
  exclusive<T>(name: string, work: () => Promise<T>, waitMs?: number): Promise<T>;

  close(): Promise<void>;
}

/** One process (SQLite): the local calls already reached everyone; this process always leads. */
export class LocalCoordination implements Coordination {
  readonly shared = false;
  readonly listening = true;
  async publish(): Promise<void> {}
  async publishAcknowledged(): Promise<boolean> {
    return true;
  }
  subscribe(): () => void {
    return () => {};
  }
  onResync(): () => void {
    return () => {};
  }
  async tryLead(): Promise<boolean> {
    return true;
  }
  exclusive<T>(_name: string, work: () => Promise<T>): Promise<T> {
    return work();
  }
  async close(): Promise<void> {}
}

/** The topics the control plane publishes; one per kind of thing that changes. */
export const TOPICS = {
  /** A revision's status changed (key: revision id): revision long-polls read it again. */
  revision: 'revision',
  /** A listener has work for its agents (key: listener id): agent claim long-polls look again. */
  listenerWork: 'listener-work',
  /** An OAuth flow completed or failed (key: flow id): `wait` reads it again. */
  oauthFlow: 'oauth-flow',
  /** An API key was revoked (key: the key's id): cached entries of it are dropped. */
  apiKeyRevoked: 'api-key-revoked',
  /** A listener token was revoked (key: the token's id): its waiting claim polls and its claims end. */
  listenerTokenRevoked: 'listener-token-revoked',
  /** An agent reported a deployment torn down (key: deployment id). */
  teardownDone: 'teardown-done',
  /** `DELETE …?force=true` (key: deployment id): the teardown stops waiting for an agent. */
  teardownForced: 'teardown-forced',
} as const;
