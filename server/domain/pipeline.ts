import { isTerminal, UNFINISHED_REVISION_STATUSES, type RevisionStatus } from '../../shared/schemas/revision.ts';
import type { DataPlane, StageControl } from '../dataplane/types.ts';
import type { Logger } from '../logger.ts';
import type { DeploymentRecord, RevisionRecord, RevisionTransition, Store } from '../store/types.ts';
import type { Clock } from './clock.ts';
import { BadRequest, NotFound } from './errors.ts';
import type { RevisionWatch } from './revision-watch.ts';

export type PipelineDeps = {
  store: Store;
  clock: Clock;
  log: Logger;
  watch: RevisionWatch;
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

  constructor(deps: PipelineDeps) {
    this.#deps = deps;
    this.#control = {
      transition: (change) => this.transition(change),
      log: (revisionId, type, level, message) => deps.store.appendLogs(revisionId, [{ type, level, message }], deps.clock.now()),
    };
  }

  /** Called after a revision was queued: starts it when the deployment has nothing in progress. */
  async advance(deploymentId: string): Promise<void> {
    const { store, clock, watch } = this.#deps;
    const { started, skipped } = await store.startNextRevision(deploymentId, firstStage, clock.now());
    for (const id of skipped) watch.notify(id);
    if (!started) return;
    watch.notify(started.id, started);
    await this.#dispatch(started);
  }

  /**
   * A new deployment has nothing in progress, so its first revision is created already in its first
   * stage (one write transaction fewer per create); this hands it to its data plane.
   */
  async startedOnCreate(revisionId: string): Promise<void> {
    const revision = await this.#deps.store.getRevisionById(revisionId);
    if (!revision) return;
    this.#deps.watch.notify(revision.id, revision);
    await this.#dispatch(revision);
  }

  /** Applies one stage change; when it ends the revision, starts the deployment's next one. */
  async transition(change: RevisionTransition): Promise<RevisionRecord | null> {
    const { store, clock, watch } = this.#deps;
    const revision = await store.transitionRevision(change, clock.now());
    if (!revision) return null;
    watch.notify(revision.id, revision);
    if (isTerminal(revision.status)) {
      await this.advance(revision.deployment_id);
    }
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
    const work = async () => {
      const revisions = await store.listRevisions(deployment.tenant_id, deployment.id, { limit: 100, offset: 0, status: [...UNFINISHED_REVISION_STATUSES] });
      for (const revision of revisions.resources) await this.interruptUnfinished(revision, 'Interrupted because the deployment is being deleted.');
      await (await this.#dataPlaneFor(deployment)).teardown(deployment);
      await store.removeDeployment(deployment.id);
      log.info('deployment removed', { deployment_id: deployment.id });
    };
    work()
      .catch((error: unknown) => log.error('teardown failed; a repeated DELETE or the next start retries it', { deployment_id: deployment.id, error: String(error) }))
      .finally(() => this.#tearingDown.delete(deployment.id));
  }

  isTearingDown(deploymentId: string): boolean {
    return this.#tearingDown.has(deploymentId);
  }

  /**
   * The deployment's data plane gets the started revision, on the next turn of the event loop: the
   * data plane's first write then does not delay the answer to the request that started it.
   */
  async #dispatch(revision: RevisionRecord): Promise<void> {
    const { store, log } = this.#deps;
    setImmediate(() => {
      const handOver = async () => {
        const [work, deployment] = await Promise.all([store.getRevisionWork(revision.id), store.getDeploymentById(revision.deployment_id)]);
        if (!work || !deployment) return;
        (await this.#dataPlaneFor(deployment)).run(work, deployment, this.#control);
      };
      handOver().catch((error: unknown) => log.error('pipeline: could not hand a revision to its data plane', { revision_id: revision.id, error: String(error) }));
    });
  }

  /** Contract §5: the deployment's listener, else its workspace's default; agents serve `local` and `k8s`. */
  async #dataPlaneFor(deployment: DeploymentRecord): Promise<DataPlane> {
    return (await this.#deps.listenerAgent.serves?.(deployment)) ? this.#deps.listenerAgent : this.#deps.sandbox;
  }

  stop(): void {
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
