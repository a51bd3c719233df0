import { asStorageUnavailable } from './storage-unavailable.ts';

/** How long one write probe's answer is reused: a probe per `/readyz` call would be a write per probe. */
const PROBE_CACHE_MS = 1000;

export type ReadinessState = { ok: true } | { ok: false; problem: string };

/**
 * Whether the server can do its work: the database takes a real write. The answer is cached
 * briefly; a storage failure seen anywhere (a request, the pipeline) replaces it at once, so
 * `/readyz` fails as soon as writes fail (for at least the cache's second, even where the probe's
 * own small write would still fit), and passes again once a later probe's write succeeds.
 */
export class Readiness {
  readonly #probe: () => Promise<void>;
  readonly #now: () => number;
  #cached: { state: ReadinessState; at: number } | undefined;
  #running: Promise<ReadinessState> | undefined;

  constructor(deps: { probe: () => Promise<void>; now?: () => number }) {
    this.#probe = deps.probe;
    this.#now = deps.now ?? (() => performance.now());
  }

  /** Called where a storage failure was caught. */
  storageFailed(problem: string): void {
    this.#cached = { state: { ok: false, problem }, at: this.#now() };
  }

  async check(): Promise<ReadinessState> {
    const cached = this.#cached;
    if (cached && this.#now() - cached.at < PROBE_CACHE_MS) return cached.state;
    // Concurrent probes of the same moment share one write.
    this.#running ??= this.#run().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #run(): Promise<ReadinessState> {
    let state: ReadinessState;
    try {
      await this.#probe();
      state = { ok: true };
    } catch (error) {
      state = { ok: false, problem: asStorageUnavailable(error)?.message ?? 'The database does not take writes.' };
    }
    this.#cached = { state, at: this.#now() };
    return state;
  }
}
