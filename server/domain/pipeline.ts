import { isTerminal, UNFINISHED_REVISION_STATUSES, type RevisionStatus } from '../../shared/schemas/revision.ts';
import type { DataPlane, FirstStep, FirstStepDeployment, FirstStepRevision, StageControl } from '../dataplane/types.ts';
import type { Logger } from '../logger.ts';
import type { DeploymentRecord, RevisionRecord, RevisionTransition, Store } from '../store/types.ts';
import { asStorageUnavailable } from '../store/storage-errors.ts';
import type { Clock } from './clock.ts';
import { BadRequest, NotFound } from './errors.ts';
import type { Readiness } from './readiness.ts';
import type { RevisionWatch } from './revision-watch.ts';

/** Waits between attempts of a write the storage refused: doubling from the first, up to the last. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5000;

/** Thrown into pipeline work that was waiting for the storage when the pipeline stopped. */
class PipelineStopped extends Error {
  override readonly name = 'PipelineStopped';
}

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
  /** Deployments whose teardown is running in this process. */
  readonly #tearingDown = new Set<string>();
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
      transition: async (change) => this.#ended(await this.#retrying('change a revision\'s stage', () => deps.store.transitionRevision(change, deps.clock.now()))),
      log: (revisionId, type, level, message) => this.#retrying('write a log line', () => deps.store.appendLogs(revisionId, [{ type, level, message }], deps.clock.now())),
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
      const { started, skipped } = await store.startNextRevision(deploymentId, firstStage, clock.now());
      for (const id of skipped) watch.notify(id);
      if (!started) return;
      watch.notify(started.id, started);
      await this.#dispatch(started);
    });
  }

  /**
   * The step the data plane of a deployment about to be created takes at once on its first
   * revision, when that data plane is the sandbox (a listener agent takes its steps when it claims
   * the work): the create stores the revision already past it, with its log line, in its own
   * transaction, so a create is one commit. Which data plane serves it is decided as for a stored
   * deployment: its listener, else its workspace's default; `local` and `k8s` are agents'.
   */
  async firstStepOnCreate(tenantId: string, deployment: FirstStepDeployment, revision: FirstStepRevision): Promise<FirstStep | null> {
    const { store, sandbox } = this.#deps;
    if (!sandbox.firstStep) return null;
    const listenerId = deployment.source_config.listener_id ?? (await store.getWorkspace(tenantId))?.default_listener_id ?? null;
    const listener = listenerId ? await store.getListener(tenantId, listenerId) : null;
    if (listener?.compute_type === 'local' || listener?.compute_type === 'k8s') return null;
    return sandbox.firstStep(revision, deployment);
  }

  /**
   * A new deployment has nothing in progress, so its first revision is created already in its first
   * stage, or past it (`firstStepOnCreate`): one write transaction per create; this hands it to its
   * data plane.
   */
  async startedOnCreate(revisionId: string, deploymentId: string): Promise<void> {
    // Nobody can be waiting on a revision whose id the create has not answered yet: no read to
    // announce it with; the data plane reads what it needs when it takes it.
    await this.#dispatch({ id: revisionId, deployment_id: deploymentId });
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
    this.#deps.watch.notify(revision.id, revision);
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
   * Called once at start: hands every revision that was mid-pipeline back to its data plane,
   * starts deployments whose queue was waiting, and finishes deletions that were under way.
   */
  async resume(): Promise<{ resumed: number; deleting: number }> {
    const { store, log } = this.#deps;
    const unfinished = await store.listUnfinishedRevisions();
    const queuedDeployments = new Set<string>();
    let resumed = 0;
    for (const revision of unfinished) {
      if (revision.status === 'QUEUED') {
        queuedDeployments.add(revision.deployment_id);
      } else {
        resumed += 1;
        await this.#dispatch(revision);
      }
    }
    for (const deploymentId of queuedDeployments) await this.advance(deploymentId);
    const deleting = await store.listDeletingDeployments();
    for (const deployment of deleting) this.startTeardown(deployment);
    if (resumed + queuedDeployments.size + deleting.length > 0) {
      log.info('pipeline: resumed work left by the previous run', { revisions: resumed, queued_deployments: queuedDeployments.size, deletions: deleting.length });
    }
    return { resumed, deleting: deleting.length };
  }

  /** Interrupts what is unfinished, tears the deployment down on its data plane, then removes it. */
  startTeardown(deployment: DeploymentRecord): void {
    const { store, log } = this.#deps;
    if (this.#tearingDown.has(deployment.id)) return;
    this.#tearingDown.add(deployment.id);
    const work = () => this.#retrying('tear a deployment down', async () => {
      const revisions = await store.listRevisions(deployment.tenant_id, deployment.id, { limit: 100, offset: 0, status: [...UNFINISHED_REVISION_STATUSES] });
      for (const revision of revisions.resources) await this.interruptUnfinished(revision, 'Interrupted because the deployment is being deleted.');
      await (await this.#dataPlaneFor(deployment)).teardown(deployment);
      await store.removeDeployment(deployment.id);
      log.info('deployment removed', { deployment_id: deployment.id });
    });
    work()
      .catch((error: unknown) => error instanceof PipelineStopped || log.error('teardown failed; a repeated DELETE or the next start retries it', { deployment_id: deployment.id, error: String(error) }))
      .finally(() => this.#tearingDown.delete(deployment.id));
  }

  /** Lets the deployment's teardown finish without its data plane (a listener's agents gone for good). */
  forceTeardown(deploymentId: string): void {
    this.#deps.listenerAgent.forceTeardown?.(deploymentId);
  }

  isTearingDown(deploymentId: string): boolean {
    return this.#tearingDown.has(deploymentId);
  }

  /**
   * The deployment's data plane gets the started revision, on the next turn of the event loop: the
   * data plane's first write then does not delay the answer to the request that started it.
   */
  async #dispatch(revision: Pick<RevisionRecord, 'id' | 'deployment_id'>): Promise<void> {
    const { store, log } = this.#deps;
    setImmediate(() => {
      const handOver = async () => {
        const [work, deployment] = await this.#retrying('read a started revision', () =>
          Promise.all([store.getRevisionWork(revision.id), store.getDeploymentById(revision.deployment_id)]),
        );
        if (!work || !deployment) return;
        (await this.#dataPlaneFor(deployment)).run(work, deployment, this.#control);
      };
      handOver().catch((error: unknown) => error instanceof PipelineStopped || log.error('pipeline: could not hand a revision to its data plane', { revision_id: revision.id, error: String(error) }));
    });
  }

  /** Contract §5: the deployment's listener, else its workspace's default; agents serve `local` and `k8s`. */
  async #dataPlaneFor(deployment: DeploymentRecord): Promise<DataPlane> {
    return (await this.#deps.listenerAgent.serves?.(deployment)) ? this.#deps.listenerAgent : this.#deps.sandbox;
  }

  stop(): void {
    this.#stopped = true;
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
