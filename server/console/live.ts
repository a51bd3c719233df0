import type { Logger } from '../logger.ts';
import type { ConsoleStore, LiveSubject } from '../store/console.ts';

/** Told when the page it watches is out of date. */
export type LiveListener = () => void;

type Watched = { subject: LiveSubject; fingerprint: string | undefined; listeners: Set<LiveListener> };

/**
 * What keeps open console pages current. Each distinct subject (a workspace's deployments, one
 * deployment, one revision) is read once per tick, however many pages watch it, as one small
 * fingerprint query; a page is told when its subject's fingerprint changes and then fetches itself
 * again. Polling the database rather than listening to the pipeline in this process is what makes
 * changes made by another server process, by a listener agent or by log lines show as well.
 */
export class LiveHub {
  readonly #store: ConsoleStore;
  readonly #log: Logger;
  readonly #tickMs: number;
  readonly #watched = new Map<string, Watched>();
  #timer: NodeJS.Timeout | undefined;
  #ticking = false;

  constructor(deps: { store: ConsoleStore; log: Logger; tickMs: number }) {
    this.#store = deps.store;
    this.#log = deps.log;
    this.#tickMs = deps.tickMs;
  }

  /** What a page about `subject` would show now, as its fingerprint (pages carry it, so a change before they watch is seen). */
  fingerprint(subject: LiveSubject): Promise<string> {
    return this.#store.fingerprint(subject);
  }

  /**
   * Calls `listener` whenever `subject` changes from `current` (its fingerprint, just read), until
   * the answered function is called.
   */
  watch(subject: LiveSubject, current: string, listener: LiveListener): () => void {
    const key = subjectKey(subject);
    let watched = this.#watched.get(key);
    if (!watched) {
      watched = { subject, fingerprint: current, listeners: new Set() };
      this.#watched.set(key, watched);
    }
    watched.listeners.add(listener);
    const entry = watched;
    return () => {
      entry.listeners.delete(listener);
      if (entry.listeners.size === 0 && this.#watched.get(key) === entry) this.#watched.delete(key);
    };
  }

  /** How many pages are watching (benchmarks and tests). */
  get size(): number {
    let n = 0;
    for (const watched of this.#watched.values()) n += watched.listeners.size;
    return n;
  }

  start(): void {
    this.#timer = setInterval(() => void this.tick(), this.#tickMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** Reads every watched subject's fingerprint once and tells the pages of those that changed. */
  async tick(): Promise<void> {
    // A slow database must not pile up passes: a tick that finds the last one running skips.
    if (this.#ticking) return;
    this.#ticking = true;
    try {
      for (const watched of [...this.#watched.values()]) {
        const fingerprint = await this.#store.fingerprint(watched.subject);
        const changed = watched.fingerprint !== undefined && watched.fingerprint !== fingerprint;
        watched.fingerprint = fingerprint;
        if (changed) for (const listener of [...watched.listeners]) listener();
      }
    } catch (error) {
      this.#log.warn('console: could not read what open pages show; trying again next tick', { error: String(error) });
    } finally {
      this.#ticking = false;
    }
  }
}

function subjectKey(subject: LiveSubject): string {
  switch (subject.kind) {
    case 'deployments':
      return `l:${subject.tenantId}:${[...subject.deploymentIds].sort().join(',')}`;
    case 'deployment':
      return `d:${subject.tenantId}:${subject.deploymentId}`;
    case 'revision':
      return `r:${subject.tenantId}:${subject.deploymentId}:${subject.revisionId}`;
  }
}
