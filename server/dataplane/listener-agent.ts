import type { Clock } from '../lib/clock.ts';
import type { RevisionWatch } from '../lib/revision-watch.ts';
import type { Logger } from '../logger.ts';
import type { AgentStore } from '../store/agents.ts';
import { type Coordination, LocalCoordination, TOPICS } from '../store/coordination.ts';
import type { DeploymentRecord } from '../store/types.ts';
import type { DataPlane } from './types.ts';

/**
 * The data plane of `local` and `k8s` listeners: the work stays in the database (revisions in their
 * stages, deployments being deleted) and a listener agent pulls it through the agent routes. This
 * side only wakes the agents' long-polls and waits for teardowns the agents report done; it also
 * sweeps listeners that went silent (their deployments become `UNKNOWN`).
 */
export class AgentDataPlane implements DataPlane {
  readonly name = 'listener-agent';
  readonly #agents: AgentStore;
  readonly #wake: RevisionWatch;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #leaseMs: number;
  readonly #coordination: Coordination;
  /** Teardowns waiting for an agent: the deployment, and who waits. */
  readonly #teardowns = new Map<string, { deployment: DeploymentRecord; waiters: Set<() => void> }>();
  #sweep: NodeJS.Timeout | null = null;

  /**
   * `coordination`: the other processes on the database. An agent's "teardown done" (or a forced
   * DELETE) may reach another process than the pipeline waiting for it: each is published, and
   * one heard from another process finishes the teardown waiting here.
   */
  constructor(deps: { agents: AgentStore; wake: RevisionWatch; clock: Clock; log: Logger; leaseMs: number; coordination?: Coordination }) {
    this.#agents = deps.agents;
    this.#wake = deps.wake;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#leaseMs = deps.leaseMs;
    this.#coordination = deps.coordination ?? new LocalCoordination();
    this.#coordination.subscribe(TOPICS.teardownDone, (deploymentId) => this.#finished(deploymentId));
    this.#coordination.subscribe(TOPICS.teardownForced, (deploymentId) => this.#finished(deploymentId));
  }

  /** Whether an agent serves this deployment (its listener is `local` or `k8s`). */
  async serves(deployment: DeploymentRecord): Promise<boolean> {
    const listener = await this.#agents.servingListener(deployment.id);
    return listener?.compute_type === 'local' || listener?.compute_type === 'k8s';
  }

  run(_revision: unknown, deployment: DeploymentRecord): void {
    void this.#wakeListenerOf(deployment.id);
  }

  /**
   * Resolves when an agent of the listener reports the deployment torn down; or at once when the
   * teardown was forced; or when no agent listener serves the deployment any more (its workspace's
   * default listener was set to the sandbox): no agent would ever be offered it.
   */
  teardown(deployment: DeploymentRecord): Promise<void> {
    return new Promise((resolve) => {
      let pending = this.#teardowns.get(deployment.id);
      if (!pending) this.#teardowns.set(deployment.id, (pending = { deployment, waiters: new Set() }));
      pending.waiters.add(resolve);
      // Waiting first, then reading: a report stored before this read is found by it, one stored
      // after reaches the waiter (the protocol stores the report before it announces it).
      this.#finishIfReported(deployment.id);
      void this.#wakeListenerOf(deployment.id);
    });
  }

  /** Finishes the waiting teardown when an agent's report of it is stored (it came before the wait, or its notice was missed). */
  #finishIfReported(deploymentId: string): void {
    this.#agents
      .teardownReported(deploymentId)
      .then((reported) => reported && this.#finished(deploymentId))
      .catch((error: unknown) =>
        this.#log.error('reading a teardown report failed; the next sweep reads it again', { deployment_id: deploymentId, error: String(error) }),
      );
  }

  /**
   * An agent finished tearing the deployment down (its claim `claimId` ends with it): the report is
   * stored, then the teardown waiting for it, in whichever process, ends.
   */
  async teardownDone(deploymentId: string, claimId: string): Promise<void> {
    await this.#report(deploymentId, TOPICS.teardownDone, claimId);
  }

  #finished(deploymentId: string): void {
    const pending = this.#teardowns.get(deploymentId);
    this.#teardowns.delete(deploymentId);
    for (const resolve of pending?.waiters ?? []) resolve();
  }

  /**
   * `DELETE …?force=true` on a deployment being deleted: its teardown stops waiting for an agent
   * (the listener's agents are gone for good). Stored as the teardown's report before the DELETE is
   * answered, so it holds for a pipeline not waiting yet, in this process or another, and across a
   * restart; no agent is offered the teardown any more. What an agent may still run of it is not
   * stopped; a restarted agent does not start it again, since it is no longer live.
   */
  async forceTeardown(deploymentId: string): Promise<void> {
    await this.#report(deploymentId, TOPICS.teardownForced);
    this.#log.warn('teardown forced: the deployment is removed without waiting for its listener agent', { deployment_id: deploymentId });
  }

  /**
   * Stores the teardown's report before anyone hears of it (a wait that starts later reads it), then
   * ends the wait here and tells the other processes. Both topics end a wait alike; the forced one
   * keeps its own name for processes of an earlier version, which still listen for it.
   */
  async #report(deploymentId: string, topic: string, claimId?: string): Promise<void> {
    await this.#agents.recordTeardownDone(deploymentId, this.#clock.now(), claimId);
    this.#finished(deploymentId);
    void this.#coordination.publish(topic, deploymentId);
  }

  /**
   * Teardowns that wait for a listener that no longer serves their deployment are finished; so are
   * those whose report is stored but whose notice never came (a reconnecting listener connection).
   */
  async #handBack(): Promise<void> {
    for (const [id, pending] of [...this.#teardowns]) {
      if (await this.#agents.teardownReported(id)) {
        this.#finished(id);
        continue;
      }
      if (await this.serves(pending.deployment)) continue;
      this.#log.info('teardown handed back: no listener agent serves the deployment any more', { deployment_id: id });
      this.#finished(id);
    }
  }

  /** Wakes the long-polls of one listener's agents. */
  wake(listenerId: string): void {
    this.#wake.notify(listenerId);
  }

  /**
   * Never rejects (its callers do not wait for it): a failed read only delays the agents, whose
   * claim long-polls look for work again on their own every few seconds.
   */
  async #wakeListenerOf(deploymentId: string): Promise<void> {
    try {
      const listener = await this.#agents.servingListener(deploymentId);
      if (listener) this.#wake.notify(listener.id);
    } catch (error) {
      this.#log.warn("could not wake a listener's agents; they find the work at their next look", { deployment_id: deploymentId, error: String(error) });
    }
  }

  /** Starts the silent-listener sweep: every half lease, listeners not heard from for a lease. */
  start(): void {
    if (this.#sweep) return;
    const every = Math.max(100, Math.floor(this.#leaseMs / 2));
    this.#sweep = setInterval(() => {
      const now = this.#clock.now();
      const cutoff = new Date(Date.parse(now) - this.#leaseMs).toISOString();
      this.#agents
        .markSilent(cutoff, now)
        .then((ids) => {
          if (ids.length > 0) this.#log.warn('listener agent silent past its lease: deployments are UNKNOWN', { deployments: ids.length });
        })
        .catch((error: unknown) => this.#log.error('silent-listener sweep failed', { error: String(error) }));
      this.#handBack().catch((error: unknown) => this.#log.error('teardown hand-back check failed', { error: String(error) }));
    }, every);
    this.#sweep.unref();
  }

  stop(): void {
    if (this.#sweep) clearInterval(this.#sweep);
    this.#sweep = null;
  }
}
