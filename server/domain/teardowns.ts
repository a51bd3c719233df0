import { UNFINISHED_REVISION_STATUSES } from '../../shared/schemas/revision.ts';
import type { DataPlane } from '../dataplane/types.ts';
import type { Logger } from '../logger.ts';
import type { DeploymentRecord, RevisionRecord, RevisionStore, TeardownStore, WorkLease } from '../store/types.ts';
import { inBatches, SWEEP_BATCH } from './running-revisions.ts';
import { PipelineStopped, type StorageRetry } from './storage-retry.ts';

export type TeardownDeps = {
  store: TeardownStore & Pick<RevisionStore, 'listRevisions'>;
  log: Logger;
  retry: StorageRetry;
  /** A lease for this process from now. */
  lease: () => WorkLease;
  /** Ends a revision that has not ended as INTERRUPTED (the pipeline's stage change, which starts nothing more here). */
  interruptUnfinished: (revision: RevisionRecord, reason: string) => Promise<unknown>;
  /** The deployment's data plane, which tears down what it runs. */
  dataPlaneFor: (deployment: DeploymentRecord) => Promise<DataPlane>;
};

/**
 * Deployments being deleted that this process tears down: each under a teardown lease, so one
 * process runs it; a process that dies leaves its lease to lapse, and another's sweep takes it over.
 */
export class Teardowns {
  readonly #deps: TeardownDeps;
  /** Deployments whose teardown is running in this process (their teardown leases are renewed). */
  readonly #tearingDown = new Set<string>();

  constructor(deps: TeardownDeps) {
    this.#deps = deps;
  }

  has(deploymentId: string): boolean {
    return this.#tearingDown.has(deploymentId);
  }

  /**
   * Interrupts what is unfinished, tears the deployment down on its data plane, then removes it:
   * in this process when it gets the deployment's teardown lease; a live process holding it
   * already (a repeated DELETE through another process) is left to finish it.
   */
  start(deployment: DeploymentRecord): void {
    const { store, log, retry } = this.#deps;
    if (this.#tearingDown.has(deployment.id)) return;
    this.#tearingDown.add(deployment.id);
    retry
      .retrying('claim a teardown', () => store.claimTeardown(deployment.id, this.#deps.lease()))
      .then(
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

  /** A sweep's part: takes over the teardowns whose lease has passed and runs them here; answers how many. */
  async takeOver(stopped: () => boolean): Promise<number> {
    let deleting = 0;
    for (;;) {
      const taken = await this.#deps.store.takeOverTeardowns(this.#deps.lease(), SWEEP_BATCH);
      for (const deployment of taken) {
        if (this.#tearingDown.has(deployment.id)) continue;
        deleting += 1;
        this.#tearingDown.add(deployment.id);
        this.#tearDown(deployment);
      }
      if (taken.length < SWEEP_BATCH || stopped()) return deleting;
    }
  }

  /** Renews (or, with a lease ending now, ends) the teardown leases of this process: one UPDATE per batch. */
  async renewLeases(lease: WorkLease): Promise<void> {
    await inBatches([...this.#tearingDown], (batch) => this.#deps.store.renewTeardownLeases(batch, lease));
  }

  /** The teardown itself, its lease held; a failure leaves the lease to lapse, and a sweep retries it. */
  #tearDown(deployment: DeploymentRecord): void {
    const { store, log, retry } = this.#deps;
    const work = () =>
      retry.retrying('tear a deployment down', async () => {
        const revisions = await store.listRevisions(deployment.tenant_id, deployment.id, { limit: 100, offset: 0, status: [...UNFINISHED_REVISION_STATUSES] });
        for (const revision of revisions.resources) await this.#deps.interruptUnfinished(revision, 'Interrupted because the deployment is being deleted.');
        await (await this.#deps.dataPlaneFor(deployment)).teardown(deployment);
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
}
