import type { ComputeType } from '../../shared/schemas/listener.ts';
import { isTerminal, type RevisionStatus, UNFINISHED_REVISION_STATUSES } from '../../shared/schemas/revision.ts';
import type { DataPlane, FirstStep, FirstStepDeployment, FirstStepRevision, StageControl } from '../dataplane/types.ts';
import type { Clock } from '../lib/clock.ts';
import type { RevisionWatch } from '../lib/revision-watch.ts';
import type { Logger } from '../logger.ts';
import type {
  DeploymentRecord,
  DeploymentStore,
  ListenerStore,
  RevisionLeaseStore,
  RevisionLogStore,
  RevisionRecord,
  RevisionRunner,
  RevisionStore,
  RevisionTransition,
  RevisionWork,
  TeardownStore,
  WorkLease,
} from '../store/types.ts';
import { BadRequest, NotFound } from './errors.ts';
import type { Readiness } from './readiness.ts';
import { RunningRevisions, SWEEP_BATCH } from './running-revisions.ts';
import { PipelineStopped, StorageRetry } from './storage-retry.ts';
import { planStart } from './store-rules.ts';
import { Teardowns } from './teardowns.ts';
import { leaseFromNow } from './work-lease.ts';

/**
 * What a create's first revision is given to, the step it is stored past, and the process that runs
 * it, named in the create's own write (see `planCreate`).
 */
export type CreatePlan = { dataPlane: DataPlane; step: FirstStep | null; runner: RevisionRunner };

/** The slices of the store the pipeline uses. */
export type PipelineStore = RevisionStore &
  RevisionLogStore &
  RevisionLeaseStore &
  TeardownStore &
  Pick<DeploymentStore, 'getDeploymentById'> &
  Pick<ListenerStore, 'servingComputeType'>;

export type PipelineDeps = {
  store: PipelineStore;
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
  readonly #retry: StorageRetry;
  readonly #running: RunningRevisions;
  readonly #teardowns: Teardowns;
  #heartbeat: NodeJS.Timeout | undefined;
  #sweeper: NodeJS.Timeout | undefined;

  constructor(deps: PipelineDeps) {
    this.#deps = deps;
    this.#retry = new StorageRetry(deps);
    this.#running = new RunningRevisions(deps);
    this.#teardowns = new Teardowns({
      ...deps,
      retry: this.#retry,
      lease: () => this.#lease(),
      interruptUnfinished: (revision, reason) => this.interruptUnfinished(revision, reason),
      dataPlaneFor: (deployment) => this.#dataPlaneFor(deployment),
    });
    // A data plane's stage changes and log lines are retried while the storage refuses them (disk
    // full, I/O error): each is one transaction that either happened whole or not at all, and a
    // stage change is a compare-and-set, so a retry never applies anything twice. Without this a
    // refused write would leave the revision in its stage, and its deployment's queue, stuck.
    this.#control = {
      transition: async (change) =>
        this.#ended(await this.#retry.retrying("change a revision's stage", () => deps.store.transitionRevision(change, deps.clock.now()))),
      log: async (revisionId, type, level, message) => {
        await this.#retry.retrying('write a log line', () => deps.store.appendLogs(revisionId, [{ type, level, message }], deps.clock.now()));
      },
    };
  }

  /**
   * Called after a revision was queued: starts it when the deployment has nothing in progress. The
   * queued revision is already stored, so a storage failure here is not the caller's: it is retried
   * in the background until the storage takes writes again.
   */
  async advance(deploymentId: string): Promise<void> {
    await this.#retry.nowOrLater('start the next revision', async () => {
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
  async planCreate(
    tenantId: string,
    deployment: FirstStepDeployment,
    revision: FirstStepRevision,
    /** The serving listener's compute type when the caller read it already (null: none); otherwise read here. */
    servingComputeType?: ComputeType | null,
  ): Promise<CreatePlan> {
    const { store, sandbox, listenerAgent, processId, clock } = this.#deps;
    const computeType = servingComputeType !== undefined ? servingComputeType : await store.servingComputeType(tenantId, deployment.source_config.listener_id);
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
    // The waiters first (a thousand held long-polls are answered before `notify` returns): the
    // metrics can count the change after them.
    this.#deps.watch.notify(revision.id, revision);
    this.#deps.observer?.revisionChanged(revision);
    if (isTerminal(revision.status)) this.#running.ended(revision.id);
    // The stage change is stored; `advance` starts the next revision now or, when the storage
    // refuses, once it takes writes again.
    if (isTerminal(revision.status)) await this.advance(revision.deployment_id);
    return revision;
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
    if (!this.#retry.stopped && !this.#heartbeat) {
      this.#heartbeat = setInterval(() => void this.#retry.background('renew its leases', () => this.#renew()), Math.max(50, Math.floor(leaseMs / 3)));
      this.#heartbeat.unref();
      this.#sweeper = setInterval(
        () =>
          void this.#retry.background('take over expired work', async () => {
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

  /** The process lease and what it covers, and this process's teardown leases. */
  async #renew(): Promise<void> {
    const lease = this.#lease();
    await this.#running.renew(lease);
    await this.#teardowns.renewLeases(lease);
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
        if (this.#running.retaken(revision.id)) continue;
        resumed += 1;
        await this.#dispatch(revision, 'held');
      }
      if (taken.length < SWEEP_BATCH || this.#retry.stopped) break;
    }
    const deleting = await this.#teardowns.takeOver(() => this.#retry.stopped);
    const stalled = await store.listStalledQueuedDeployments();
    for (const deploymentId of stalled) await this.advance(deploymentId);
    return { resumed, queued: stalled.length, deleting };
  }

  /**
   * Interrupts what is unfinished, tears the deployment down on its data plane, then removes it
   * (`Teardowns.start`): in this process when it gets the deployment's teardown lease.
   */
  startTeardown(deployment: DeploymentRecord): void {
    this.#teardowns.start(deployment);
  }

  /** Lets the deployment's teardown finish without its data plane (a listener's agents gone for good). */
  async forceTeardown(deploymentId: string): Promise<void> {
    await this.#deps.listenerAgent.forceTeardown?.(deploymentId);
  }

  isTearingDown(deploymentId: string): boolean {
    return this.#teardowns.has(deploymentId);
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
    this.#running.add(revision.id, holder);
    setImmediate(() => {
      const handOver = async () => {
        // Stopped meanwhile (shutting down): the revision stays this process's until its lease passes.
        if (this.#retry.stopped) throw new PipelineStopped();
        // A revision changed since it was written (interrupted by a DELETE in between) is no
        // matter: every step of a data plane is a compare-and-set on its status.
        const [work, deployment] = known
          ? [known.work, known.deployment]
          : await this.#retry.retrying('read a started revision', () =>
              Promise.all([store.getRevisionWork(revision.id), store.getDeploymentById(revision.deployment_id)]),
            );
        if (!work || !deployment || isTerminal(work.status)) {
          this.#running.ended(revision.id);
          return;
        }
        const dataPlane = known?.dataPlane ?? (await this.#retry.retrying("find a started revision's data plane", () => this.#dataPlaneFor(deployment)));
        dataPlane.run(work, deployment, this.#control);
      };
      handOver().catch((error: unknown) => {
        // Given up: a sweep (this process's or another's) takes it over and hands it over again
        // once it has been unchanged for a lease.
        this.#running.handOverFailed(revision.id);
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
    const { clock, processId } = this.#deps;
    const endedNow = leaseFromNow(clock, processId, 0);
    await this.#running.end(endedNow.now);
    await this.#teardowns.renewLeases(endedNow);
  }

  stop(): void {
    this.#retry.stop();
    clearInterval(this.#heartbeat);
    clearInterval(this.#sweeper);
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
