import { isTerminal, type RevisionStatus, UNFINISHED_REVISION_STATUSES } from '../../shared/schemas/revision.ts';
import type { DataPlane, FirstStep, FirstStepDeployment, FirstStepRevision, StageControl } from '../dataplane/types.ts';
import type { Clock } from '../lib/clock.ts';
import type { RevisionWatch } from '../lib/revision-watch.ts';
import type { Logger } from '../logger.ts';
import type { DeploymentRecord, RevisionRecord, RevisionRunner, RevisionTransition, RevisionWork, Store, WorkLease } from '../store/types.ts';
import { BadRequest, NotFound } from './errors.ts';
import type { Readiness } from './readiness.ts';
import { asStorageUnavailable } from './storage-unavailable.ts';
import { planStart } from './store-rules.ts';
import { leaseFromNow } from './work-lease.ts';

/** Waits between attempts of a write the storage refused: doubling from the first, up to the last. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5000;
/** Revisions (and teardowns) one sweep statement takes over at most; a sweep repeats it while it fills. */
const SWEEP_BATCH = 100;
/**
 * Revisions held (or teardown leases renewed) per statement. A process's revisions are covered by
 * its one process lease, so they are written only when started here (to name this process: a
 * create names it in its own write, other starts at the next renewal) and after that lease lapsed
 * (to find which are still its own); SQLite's writes hold the event loop,
 * and one UPDATE over 20,000 revisions stops every request for ~180 ms (measured with the paced
 * benchmark, which holds its revisions at BUILDING). In batches, with other work let in between,
 * no such statement holds the loop for more than a few milliseconds.
 */
const RENEW_BATCH = 500;

/** Thrown into pipeline work that was waiting for the storage when the pipeline stopped. */
class PipelineStopped extends Error {
  override readonly name = 'PipelineStopped';
}

/**
 * What a create's first revision is given to, the step it is stored past, and the process that runs
 * it, named in the create's own write (see `planCreate`).
 */
export type CreatePlan = { dataPlane: DataPlane; step: FirstStep | null; runner: RevisionRunner };

export type PipelineDeps = {
  store: Store;
  clock: Clock;
  log: Logger;
  watch: RevisionWatch;
  /** Told about storage failures the pipeline meets, so `/readyz` fails while they last. */
  readiness?: Readiness;
  /** The data plane for `github` deployments and `sandbox` listeners. */
  sandbox: DataPlane;
  /** The data plane for `local` and `k8s` listeners (listener agents). */
  listenerAgent: DataPlane;
  /** This server process among those sharing the database: the owner its leases name. */
  processId: string;
  /** `PIPELINE_LEASE_MS`: how long a revision or teardown stays this process's without a renewal. */
  leaseMs: number;
  /** Told of every stage change this process makes (the metrics). */
  observer?: { revisionChanged(revision: RevisionRecord): void };
};

/**
 * The revision state machine. All state is in the store; this class only decides what happens
 * next and hands started revisions to the data plane that serves their deployment. One revision
 * per deployment is in progress at a time; when it ends, the newest queued one starts and older
 * queued ones are skipped.
 */
export class Pipeline {
  readonly #deps: PipelineDeps;
  readonly #control: StageControl;
  /** Deployments whose teardown is running in this process (their teardown leases are renewed). */
  readonly #tearingDown = new Set<string>();
  /** Started revisions this process handed to a data plane: its process lease covers them until they end. */
  readonly #running = new Set<string>();
  /** Those of `#running` started here that do not name this process yet: the next renewal holds them. */
  readonly #unheld = new Set<string>();
  /** Revisions whose hand-over failed: the next renewal gives them up, for a sweep to take over. */
  readonly #toRelease = new Set<string>();
  /** Renewals left that re-check every revision in `#running` (after the process lease lapsed). */
  #recheck = 0;
  /** Whether this process has had a lease: a renewal that finds none after that is a lapse (the first finds none too). */
  #leased = false;
  #heartbeat: NodeJS.Timeout | undefined;
  #sweeper: NodeJS.Timeout | undefined;
  /** Periodic work still running (see #background). */
  readonly #busy = new Set<string>();
  /** Waits of work retrying a refused write; stop() ends them. */
  readonly #retryWaits = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();
  #stopped = false;

  constructor(deps: PipelineDeps) {
    this.#deps = deps;
    // A data plane's stage changes and log lines are retried while the storage refuses them (disk
    // full, I/O error): each is one transaction that either happened whole or not at all, and a
    // stage change is a compare-and-set, so a retry never applies anything twice. Without this a
    // refused write would leave the revision in its stage, and its deployment's queue, stuck.
    this.#control = {
      transition: async (change) =>
        this.#ended(await this.#retrying("change a revision's stage", () => deps.store.transitionRevision(change, deps.clock.now()))),
      log: async (revisionId, type, level, message) => {
        await this.#retrying('write a log line', () => deps.store.appendLogs(revisionId, [{ type, level, message }], deps.clock.now()));
      },
    };
  }

  /**
   * Called after a revision was queued: starts it when the deployment has nothing in progress. The
   * queued revision is already stored, so a storage failure here is not the caller's: it is retried
   * in the background until the storage takes writes again.
   */
  async advance(deploymentId: string): Promise<void> {
    await this.#nowOrLater('start the next revision', async () => {
      const { store, clock, watch } = this.#deps;
      const { started, skipped } = await store.startNextRevision(deploymentId, { firstStage, planStart }, clock.now());
      for (const id of skipped) watch.notify(id);
      if (!started) return;
      this.#deps.observer?.revisionChanged(started);
      watch.notify(started.id, started);
      await this.#dispatch(started);
    });
  }

  /**
   * Which data plane takes a deployment about to be created, and the step it takes at once on the
   * first revision when that is the sandbox (a listener agent takes its steps when it claims the
   * work): the create stores the revision already past it, with its log line, in its own
   * transaction, so a create is one commit. Decided as for a stored deployment: its listener, else
   * its workspace's default; `local` and `k8s` are agents'. The same write names this process as
   * the revision's runner (when its lease is live), which otherwise its next renewal would write.
   */
  async planCreate(tenantId: string, deployment: FirstStepDeployment, revision: FirstStepRevision): Promise<CreatePlan> {
    const { store, sandbox, listenerAgent, processId, clock } = this.#deps;
    const computeType = await store.servingComputeType(tenantId, deployment.source_config.listener_id);
    const runner = { owner: processId, now: clock.now() };
    if (computeType === 'local' || computeType === 'k8s') return { dataPlane: listenerAgent, step: null, runner };
    return { dataPlane: sandbox, step: sandbox.firstStep?.(revision, deployment) ?? null, runner };
  }

  /**
   * A new deployment has nothing in progress, so its first revision is created already in its first
   * stage, or past it (`planCreate`): one write transaction per create; this hands it to the data
   * plane the plan chose, with the records as the create wrote them (nothing to read back).
   * `held`: the create named this process as its runner; otherwise the next renewal does.
   */
  async startedOnCreate(plan: CreatePlan, work: RevisionWork, deployment: DeploymentRecord, held: boolean): Promise<void> {
    // Nobody can be waiting on a revision whose id the create has not answered yet: nothing to announce.
    await this.#dispatch(work, held ? 'held' : 'started here', { work, deployment, dataPlane: plan.dataPlane });
  }

  /** Runs `work` once now; when the storage refuses it, again in the background until it works. */
  async #nowOrLater(what: string, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      if (!asStorageUnavailable(error)) throw error;
      this.#noteStorageFailure(error, what);
      void this.#retrying(what, work, { waitFirst: true }).catch((retryError: unknown) => {
        if (!(retryError instanceof PipelineStopped)) this.#deps.log.error(`pipeline: could not ${what}`, { error: String(retryError) });
      });
    }
  }

  /**
   * Applies one stage change; when it ends the revision, starts the deployment's next one. A refused
   * write is thrown to the caller (an API request answers 503); see the data planes' control above.
   */
  async transition(change: RevisionTransition): Promise<RevisionRecord | null> {
    const { store, clock } = this.#deps;
    return this.#ended(await store.transitionRevision(change, clock.now()));
  }

  /** After a stage change was written: tells waiters, and starts the next revision when this one ended. */
  async #ended(revision: RevisionRecord | null): Promise<RevisionRecord | null> {
    if (!revision) return null;
    this.#deps.observer?.revisionChanged(revision);
    this.#deps.watch.notify(revision.id, revision);
    if (isTerminal(revision.status)) {
      this.#running.delete(revision.id);
      this.#unheld.delete(revision.id);
    }
    // The stage change is stored; `advance` starts the next revision now or, when the storage
    // refuses, once it takes writes again.
    if (isTerminal(revision.status)) await this.advance(revision.deployment_id);
    return revision;
  }

  /**
   * Runs `work` until it does not fail on storage: the waits double from 100 ms to 5 s. Other
   * errors are thrown at once; so is `PipelineStopped` when the pipeline stops meanwhile.
   */
  async #retrying<T>(what: string, work: () => Promise<T>, options: { waitFirst?: boolean } = {}): Promise<T> {
    let wait = RETRY_FIRST_MS;
    let failures = 0;
    if (options.waitFirst) {
      await this.#sleep(wait);
      wait = Math.min(wait * 2, RETRY_MAX_MS);
    }
    for (;;) {
      if (this.#stopped) throw new PipelineStopped('The pipeline stopped.');
      try {
        const result = await work();
        if (failures > 0) this.#deps.log.info('pipeline: the storage takes writes again', { what, failed_attempts: failures });
        return result;
      } catch (error) {
        if (!asStorageUnavailable(error)) throw error;
        // Said once per stretch of failures, not once per attempt.
        if (failures === 0) this.#noteStorageFailure(error, what);
        else this.#deps.readiness?.storageFailed(asStorageUnavailable(error)!.message);
        failures += 1;
      }
      await this.#sleep(wait);
      wait = Math.min(wait * 2, RETRY_MAX_MS);
    }
  }

  #noteStorageFailure(error: unknown, what: string): void {
    const problem = asStorageUnavailable(error)?.message ?? String(error);
    this.#deps.readiness?.storageFailed(problem);
    this.#deps.log.warn('pipeline: the storage refused a write; retrying with backoff until it works again', { what, problem });
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const entry = {
        timer: setTimeout(() => {
          this.#retryWaits.delete(entry);
          resolve();
        }, ms),
        wake: resolve,
      };
      this.#retryWaits.add(entry);
    });
  }

  /** `POST …/interrupt`: a revision that has not ended becomes INTERRUPTED. */
  async interrupt(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord> {
    const revision = await this.#deps.store.getRevision(tenantId, deploymentId, revisionId);
    if (!revision) throw new NotFound(`Revision ID ${revisionId} not found.`);
    if (isTerminal(revision.status)) throw new BadRequest(`Revision ${revisionId} has already ended with status ${revision.status}.`);
    const interrupted = await this.interruptUnfinished(revision, 'Interrupted at the request of an API client.');
    if (!interrupted) {
      const now = await this.#deps.store.getRevision(tenantId, deploymentId, revisionId);
      throw new BadRequest(`Revision ${revisionId} has already ended with status ${now?.status ?? 'unknown'}.`);
    }
    return interrupted;
  }

  /** Ends a revision that has not ended as INTERRUPTED; null when it ended first. */
  async interruptUnfinished(revision: RevisionRecord, reason: string): Promise<RevisionRecord | null> {
    return this.transition({
      revisionId: revision.id,
      from: UNFINISHED_REVISION_STATUSES,
      to: 'INTERRUPTED',
      statusMessage: reason,
      logs: [{ type: revision.status === 'BUILDING' || revision.status === 'AWAITING_BUILD' ? 'build' : 'deploy', level: 'warn', message: reason }],
    });
  }

  /**
   * Called once at start: the process lease is taken and the first sweep (below) takes over the
   * work no live process holds, then the leases of this process are renewed every third of a lease
   * and the sweep runs again every half lease, so the work of a process that died is resumed by
   * another one lease later. On SQLite (one process) every lease left in the file is already
   * expired: a restart resumes everything at once, with no lease to wait out.
   */
  async resume(): Promise<{ resumed: number; deleting: number }> {
    const { log, leaseMs } = this.#deps;
    await this.#renew();
    const swept = await this.#sweep();
    if (swept.resumed + swept.queued + swept.deleting > 0) {
      log.info('pipeline: resumed work left by the previous run (or by a process that stopped renewing its leases)', {
        revisions: swept.resumed,
        queued_deployments: swept.queued,
        deletions: swept.deleting,
      });
    }
    if (!this.#stopped && !this.#heartbeat) {
      this.#heartbeat = setInterval(() => void this.#background('renew its leases', () => this.#renew()), Math.max(50, Math.floor(leaseMs / 3)));
      this.#heartbeat.unref();
      this.#sweeper = setInterval(
        () =>
          void this.#background('take over expired work', async () => {
            const found = await this.#sweep();
            if (found.resumed + found.deleting > 0)
              log.warn('pipeline: took over work whose process stopped renewing its lease', { revisions: found.resumed, deletions: found.deleting });
          }),
        Math.max(50, Math.floor(leaseMs / 2)),
      );
      this.#sweeper.unref();
    }
    return { resumed: swept.resumed, deleting: swept.deleting };
  }

  /** A lease for this process from now. */
  #lease(): WorkLease {
    return leaseFromNow(this.#deps.clock, this.#deps.processId, this.#deps.leaseMs);
  }

  /**
   * Runs periodic work; a failure (the storage refusing) is logged, and the next period tries again.
   * A period that comes while the last one's work still runs (a slow database) is skipped.
   */
  async #background(what: string, work: () => Promise<void>): Promise<void> {
    if (this.#stopped || this.#busy.has(what)) return;
    this.#busy.add(what);
    try {
      await work();
    } catch (error) {
      if (this.#stopped) return;
      if (asStorageUnavailable(error)) this.#noteStorageFailure(error, what);
      else this.#deps.log.error(`pipeline: could not ${what}`, { error: String(error) });
    } finally {
      this.#busy.delete(what);
    }
  }

  /**
   * The process lease, which covers every revision this process holds (one row write however many);
   * the revisions started here since the last renewal are named as this process's. When the lease
   * had lapsed (a stall longer than a lease), every revision is checked: those another process took
   * over meanwhile are dropped. The check is repeated at the next renewal too, so a take-over that
   * was being written during the first check is seen by the second. Teardown leases: one UPDATE per
   * `RENEW_BATCH`.
   */
  async #renew(): Promise<void> {
    const { store, processId, log } = this.#deps;
    const lease = this.#lease();
    const lapsed = !(await store.renewProcessLease(lease)) && this.#leased;
    if (lapsed) this.#recheck = 2;
    this.#leased = true;
    const toHold = this.#recheck > 0 ? [...this.#running] : [...this.#unheld];
    let dropped = 0;
    await inBatches(toHold, async (batch) => {
      const held = new Set(await store.holdRevisions(batch, processId));
      for (const id of batch) {
        this.#unheld.delete(id);
        // Ended (perhaps through another process) or taken over after a stall: no longer this process's.
        if (!held.has(id) && this.#running.delete(id)) dropped += 1;
      }
    });
    if (this.#recheck > 0) this.#recheck -= 1;
    if (lapsed) {
      // The first of the two checks; the second finds what a take-over being written during it took.
      log.warn(
        "pipeline: this process's lease had lapsed (it stalled for longer than PIPELINE_LEASE_MS); revisions another process took over meanwhile are its now",
        {
          revisions_dropped: dropped,
          revisions_kept: this.#running.size,
        },
      );
    }
    if (this.#toRelease.size > 0) {
      const released = [...this.#toRelease];
      await store.releaseRevisions(released, processId);
      for (const id of released) this.#toRelease.delete(id);
    }
    await inBatches([...this.#tearingDown], (batch) => store.renewTeardownLeases(batch, lease));
  }

  /**
   * Takes over started revisions and teardowns whose lease has passed (their process died, or never
   * held them), hands them to their data plane, and starts deployments whose queued revision was
   * never started (a process died between queueing and starting it).
   */
  async #sweep(): Promise<{ resumed: number; queued: number; deleting: number }> {
    const { store, leaseMs } = this.#deps;
    let resumed = 0;
    for (;;) {
      const lease = this.#lease();
      const staleBefore = new Date(Date.parse(lease.now) - leaseMs).toISOString();
      const taken = await store.takeOverRevisions(lease, staleBefore, SWEEP_BATCH);
      for (const revision of taken) {
        // Started here and not held yet, after a stall longer than the lease: it is still being driven here.
        if (this.#running.has(revision.id)) {
          this.#unheld.delete(revision.id);
          continue;
        }
        resumed += 1;
        await this.#dispatch(revision, 'held');
      }
      if (taken.length < SWEEP_BATCH || this.#stopped) break;
    }
    let deleting = 0;
    for (;;) {
      const taken = await store.takeOverTeardowns(this.#lease(), SWEEP_BATCH);
      for (const deployment of taken) {
        if (this.#tearingDown.has(deployment.id)) continue;
        deleting += 1;
        this.#tearingDown.add(deployment.id);
        this.#tearDown(deployment);
      }
      if (taken.length < SWEEP_BATCH || this.#stopped) break;
    }
    const stalled = await store.listStalledQueuedDeployments();
    for (const deploymentId of stalled) await this.advance(deploymentId);
    return { resumed, queued: stalled.length, deleting };
  }

  /**
   * Interrupts what is unfinished, tears the deployment down on its data plane, then removes it:
   * in this process when it gets the deployment's teardown lease; a live process holding it
   * already (a repeated DELETE through another process) is left to finish it.
   */
  startTeardown(deployment: DeploymentRecord): void {
    const { store, log } = this.#deps;
    if (this.#tearingDown.has(deployment.id)) return;
    this.#tearingDown.add(deployment.id);
    this.#retrying('claim a teardown', () => store.claimTeardown(deployment.id, this.#lease())).then(
      (mine) => {
        if (mine) return this.#tearDown(deployment);
        this.#tearingDown.delete(deployment.id);
        log.info('teardown: another server process is tearing the deployment down', { deployment_id: deployment.id });
      },
      (error: unknown) => {
        this.#tearingDown.delete(deployment.id);
        if (!(error instanceof PipelineStopped))
          log.error('teardown could not be claimed; a repeated DELETE or another process retries it', { deployment_id: deployment.id, error: String(error) });
      },
    );
  }

  /** The teardown itself, its lease held; a failure leaves the lease to lapse, and a sweep retries it. */
  #tearDown(deployment: DeploymentRecord): void {
    const { store, log } = this.#deps;
    const work = () =>
      this.#retrying('tear a deployment down', async () => {
        const revisions = await store.listRevisions(deployment.tenant_id, deployment.id, { limit: 100, offset: 0, status: [...UNFINISHED_REVISION_STATUSES] });
        for (const revision of revisions.resources) await this.interruptUnfinished(revision, 'Interrupted because the deployment is being deleted.');
        await (await this.#dataPlaneFor(deployment)).teardown(deployment);
        await store.removeDeployment(deployment.id);
        log.info('deployment removed', { deployment_id: deployment.id });
      });
    work()
      .catch(
        (error: unknown) =>
          error instanceof PipelineStopped ||
          log.error('teardown failed; it is retried once its lease has passed', { deployment_id: deployment.id, error: String(error) }),
      )
      .finally(() => this.#tearingDown.delete(deployment.id));
  }

  /** Lets the deployment's teardown finish without its data plane (a listener's agents gone for good). */
  async forceTeardown(deploymentId: string): Promise<void> {
    await this.#deps.listenerAgent.forceTeardown?.(deploymentId);
  }

  isTearingDown(deploymentId: string): boolean {
    return this.#tearingDown.has(deploymentId);
  }

  /**
   * The deployment's data plane gets the started revision, on the next turn of the event loop: the
   * data plane's first write then does not delay the answer to the request that started it.
   */
  async #dispatch(
    revision: Pick<RevisionRecord, 'id' | 'deployment_id'>,
    holder: 'held' | 'started here' = 'started here',
    known?: { work: RevisionWork; deployment: DeploymentRecord; dataPlane: DataPlane },
  ): Promise<void> {
    const { store, log } = this.#deps;
    // Covered by the process lease from now on. One started here that its own write did not name
    // (a PATCH's, a push's, a create's while the lease had lapsed) names this process from the next renewal.
    this.#running.add(revision.id);
    if (holder === 'started here') this.#unheld.add(revision.id);
    setImmediate(() => {
      const handOver = async () => {
        // Stopped meanwhile (shutting down): the revision stays this process's until its lease passes.
        if (this.#stopped) throw new PipelineStopped();
        // A revision changed since it was written (interrupted by a DELETE in between) is no
        // matter: every step of a data plane is a compare-and-set on its status.
        const [work, deployment] = known
          ? [known.work, known.deployment]
          : await this.#retrying('read a started revision', () =>
              Promise.all([store.getRevisionWork(revision.id), store.getDeploymentById(revision.deployment_id)]),
            );
        if (!work || !deployment || isTerminal(work.status)) {
          this.#running.delete(revision.id);
          this.#unheld.delete(revision.id);
          return;
        }
        const dataPlane = known?.dataPlane ?? (await this.#retrying("find a started revision's data plane", () => this.#dataPlaneFor(deployment)));
        dataPlane.run(work, deployment, this.#control);
      };
      handOver().catch((error: unknown) => {
        // Given up: a sweep (this process's or another's) takes it over and hands it over again
        // once it has been unchanged for a lease.
        this.#running.delete(revision.id);
        this.#unheld.delete(revision.id);
        this.#toRelease.add(revision.id);
        if (!(error instanceof PipelineStopped))
          log.error('pipeline: could not hand a revision to its data plane; it is taken over again once its lease passes', {
            revision_id: revision.id,
            error: String(error),
          });
      });
    });
  }

  /** Contract §5: the deployment's listener, else its workspace's default; agents serve `local` and `k8s`. */
  async #dataPlaneFor(deployment: DeploymentRecord): Promise<DataPlane> {
    return (await this.#deps.listenerAgent.serves?.(deployment)) ? this.#deps.listenerAgent : this.#deps.sandbox;
  }

  /**
   * After `stop()`, on a clean shutdown: ends the leases of this process and its teardowns now, so
   * another process takes its work over at its next sweep instead of a whole lease later (a rolling
   * restart would otherwise pause that work for up to `PIPELINE_LEASE_MS`). Revisions started here
   * and not held yet are named first, so the ended lease covers them too. A process that dies
   * cannot do this; its leases simply run out.
   */
  async releaseLeases(): Promise<void> {
    const { store, clock, processId } = this.#deps;
    const endedNow = leaseFromNow(clock, processId, 0);
    await inBatches([...this.#unheld], (batch) => store.holdRevisions(batch, processId));
    await store.endProcessLease(processId, endedNow.now);
    await inBatches([...this.#tearingDown], (batch) => store.renewTeardownLeases(batch, endedNow));
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#heartbeat);
    clearInterval(this.#sweeper);
    for (const entry of this.#retryWaits) {
      clearTimeout(entry.timer);
      entry.wake();
    }
    this.#retryWaits.clear();
    this.#deps.sandbox.stop();
    this.#deps.listenerAgent.stop();
  }
}

/** `github` and `internal_source` revisions are built first; the two image sources go straight to deploy. */
export function firstStage(revision: Pick<RevisionRecord, 'source'>): RevisionStatus {
  return buildsFromSource(revision.source) ? 'AWAITING_BUILD' : 'AWAITING_DEPLOY';
}

/** Sources whose revisions have a build stage. */
export function buildsFromSource(source: RevisionRecord['source']): boolean {
  return source === 'github' || source === 'internal_source';
}

/** Runs `each` over `ids` in slices of `RENEW_BATCH`, letting waiting requests in between slices. */
async function inBatches(ids: string[], each: (batch: string[]) => Promise<unknown>): Promise<void> {
  for (let start = 0; start < ids.length; start += RENEW_BATCH) {
    if (start > 0) await new Promise<void>((resolve) => setImmediate(resolve));
    await each(ids.slice(start, start + RENEW_BATCH));
  }
}
