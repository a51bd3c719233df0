import type { Clock } from '../../lib/clock.ts';
import { requestScope } from '../../lib/request-scope.ts';
import { timeOrderedId } from '../../lib/time-ordered-id.ts';
import type { Logger } from '../../logger.ts';
import type { PushRevisionResult, Store } from '../../store/types.ts';
import type { Pipeline } from '../pipeline.ts';

/**
 * Creates the `push` revision of one commit for one deployment and hands it to the pipeline. The
 * webhook worker and the reconciler both come here, so "one revision per commit" is decided in
 * one place: the store's transaction.
 */
export class PushBuilds {
  readonly #deps: { store: Pick<Store, 'createPushRevision'>; pipeline: Pipeline; clock: Clock; log: Logger };

  constructor(deps: { store: Pick<Store, 'createPushRevision'>; pipeline: Pipeline; clock: Clock; log: Logger }) {
    this.#deps = deps;
  }

  /** `headSeen`: `commitSha` is that branch's head, recorded for the reconciler with the revision (`Store.createPushRevision`). */
  async build(deploymentId: string, commitSha: string, via: 'webhook' | 'reconciler', headSeen?: { repoRef: string }): Promise<PushRevisionResult> {
    const { store, pipeline, clock, log } = this.#deps;
    // Made by a GitHub delivery (the worker's scope names it): audited as its, in the revision's transaction.
    const actor = requestScope()?.actor;
    const result = await store.createPushRevision({ deploymentId, revisionId: timeOrderedId(), commitSha, now: clock.now(), headSeen, actor });
    if (result.outcome === 'created') {
      log.info('push: revision created', { deployment_id: deploymentId, revision_id: result.revision.id, commit: commitSha, via });
      await pipeline.advance(deploymentId);
    }
    return result;
  }
}
