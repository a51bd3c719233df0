import type { WorkItem } from '../shared/schemas/agent.ts';
import { type AgentClient, WorkGone } from './client.ts';

export type ClaimLoopOptions = {
  client: AgentClient;
  agentId: string;
  version: string;
  /** Pieces of work carried at once; the heartbeat reports it. */
  capacity: number;
  print: (line: string) => void;
  /** How long one claim long-polls (seconds). */
  waitSeconds?: number;
  /** The URL template the agent's deployments answer at, sent with every heartbeat (the `local` agent's); none by default. */
  publicUrl?: string | null;
};

/**
 * Carries one claimed piece of work. `signal` aborts when the claim is lost (a 409 on a renewal:
 * the revision was interrupted or the lease lapsed to another agent) or the agent stops; the
 * handler then stops touching the work and returns.
 */
export type ClaimHandler = (work: WorkItem, signal: AbortSignal) => Promise<void>;

/**
 * The listener protocol's side every agent shares (docs/listener-protocol.md): a heartbeat every
 * third of the lease, a long-polled claim whenever there is room, each claim's lease renewed every
 * third of it while its handler runs, and, on `stop()`, the claims in progress given back so another
 * agent of the listener takes them at once instead of after the lease.
 */
export class ClaimLoop {
  readonly #options: ClaimLoopOptions;
  readonly #handle: ClaimHandler;
  readonly #running = new Set<Promise<void>>();
  readonly #stopping = new AbortController();
  #heartbeat: NodeJS.Timeout | null = null;
  #loop: Promise<void> | null = null;
  readonly #link: ServerLink;

  constructor(options: ClaimLoopOptions, handle: ClaimHandler) {
    this.#options = options;
    this.#handle = handle;
    this.#link = new ServerLink(options.print);
  }

  /** The signal that aborts when `stop()` is called. */
  get stopping(): AbortSignal {
    return this.#stopping.signal;
  }

  /** Says hello (a failure here is the caller's: wrong URL, token or listener), then pulls in the background. */
  async start(): Promise<void> {
    const { client, agentId, version, capacity } = this.#options;
    const publicUrl = this.#options.publicUrl ?? null;
    const ack = await client.heartbeat(agentId, version, capacity, publicUrl, this.#stopping.signal);
    this.#heartbeat = setInterval(
      () => {
        client.heartbeat(agentId, version, capacity, publicUrl).then(
          () => this.#link.reached(),
          (error: unknown) => this.#link.failed(error),
        );
      },
      Math.max(100, Math.floor(ack.lease_ms / 3)),
    );
    this.#loop = this.#pull();
  }

  /** Stops pulling, aborts the work in progress, waits for it and gives its claims back. */
  async stop(): Promise<void> {
    this.#stopping.abort(new Error('the agent is stopping'));
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    await Promise.allSettled([...this.#running]);
    await this.#loop?.catch(() => undefined);
  }

  async #pull(): Promise<void> {
    const signal = this.#stopping.signal;
    while (!signal.aborted) {
      if (this.#running.size >= this.#options.capacity) {
        await Promise.race(this.#running);
        continue;
      }
      let work: WorkItem | null = null;
      try {
        work = await this.#options.client.claim(this.#options.agentId, this.#options.waitSeconds ?? 20, signal);
        this.#link.reached();
      } catch (error) {
        if (signal.aborted) return;
        this.#link.failed(error);
        await sleep(1000, signal);
        continue;
      }
      if (!work) continue;
      const task = this.#carry(work).catch((error: unknown) => this.#options.print(`agent: work failed unexpectedly: ${String(error)}`));
      const tracked: Promise<void> = task.finally(() => this.#running.delete(tracked));
      this.#running.add(tracked);
    }
  }

  async #carry(work: WorkItem): Promise<void> {
    const gone = new AbortController();
    const onStop = () => gone.abort(this.#stopping.signal.reason);
    this.#stopping.signal.addEventListener('abort', onStop, { once: true });
    const renew = setInterval(
      () => {
        this.#options.client.renew(work.claim_id).catch((error: unknown) => {
          if (error instanceof WorkGone) gone.abort(error);
        });
      },
      Math.max(100, Math.floor(work.lease_ms / 3)),
    );
    try {
      await this.#handle(work, gone.signal);
    } finally {
      clearInterval(renew);
      this.#stopping.signal.removeEventListener('abort', onStop);
      if (this.#stopping.signal.aborted) await this.#options.client.release(work.claim_id).catch(() => undefined);
    }
  }
}

/**
 * What an agent says about its connection to the control plane: once when its calls (claims,
 * heartbeats) start failing (the server restarts, the network drops), with the first error, and
 * once when one goes through again, with how long and how many calls failed; not a line per failed
 * call (a restart used to print "claim failed: TypeError: fetch failed" eight times and never say it was over).
 */
export class ServerLink {
  readonly #print: (line: string) => void;
  #lostAt: number | null = null;
  #failures = 0;

  constructor(print: (line: string) => void) {
    this.#print = print;
  }

  failed(error: unknown): void {
    this.#failures += 1;
    if (this.#lostAt !== null) return;
    this.#lostAt = Date.now();
    this.#print(`agent: the control plane does not answer (${String(error)}); retrying, and quiet until it does`);
  }

  reached(): void {
    if (this.#lostAt === null) return;
    const seconds = ((Date.now() - this.#lostAt) / 1000).toFixed(1);
    this.#print(`agent: the control plane answers again, after ${seconds} s and ${this.#failures} failed call${this.#failures === 1 ? '' : 's'}`);
    this.#lostAt = null;
    this.#failures = 0;
  }
}

/** Waits `ms`, or less when `signal` aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
