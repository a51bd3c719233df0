import type { BranchHeadReader } from '../../git/ls-remote.ts';
import type { Logger } from '../../logger.ts';
import type { DeploymentRecord, Store } from '../../store/types.ts';
import type { WebhookStore } from '../../store/webhooks.ts';
import type { Clock } from '../clock.ts';
import { integrationBlock, trackedBranch } from './match-push.ts';
import type { PushBuilds } from './push-builds.ts';

export type ReconcilerDeps = {
  store: Store;
  webhookStore: WebhookStore;
  builds: PushBuilds;
  readHead: BranchHeadReader;
  clock: Clock;
  log: Logger;
  /** `RECONCILE_INTERVAL_MS`; 0 turns the reconciler off. */
  intervalMs: number;
};

/**
 * Webhooks are a hint, not a guarantee: every `intervalMs` this compares the head of each
 * `build_on_push` deployment's branch (`git ls-remote`) with the commit of its newest revision and
 * creates the missing `push` revision. A newest revision with no known commit (built from the
 * branch name at create or PATCH time) is taken to have built the head seen on the first look; a
 * later, different head is built.
 */
export class Reconciler {
  readonly #deps: ReconcilerDeps;
  #timer: NodeJS.Timeout | null = null;
  #stopped = true;

  constructor(deps: ReconcilerDeps) {
    this.#deps = deps;
  }

  start(): void {
    if (this.#deps.intervalMs === 0) return;
    this.#stopped = false;
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  /** The next pass starts `intervalMs` after the previous one ended, so passes never overlap. */
  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.pass()
        .catch((error: unknown) => this.#deps.log.error('reconciler: pass failed', { error: String(error) }))
        .finally(() => this.#schedule());
    }, this.#deps.intervalMs);
    this.#timer.unref();
  }

  /** One comparison of every `build_on_push` deployment; answers how many revisions it created. */
  async pass(): Promise<number> {
    const { store, readHead, log } = this.#deps;
    const keyOf = (d: DeploymentRecord) => `${d.source_config.repo_url}\n${trackedBranch(d.source_revision_config.repo_ref)}`;
    // Deployments of one repository and branch one after another: each head is used right after it is read.
    const deployments = (await store.listBuildOnPushDeployments()).sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
    // One ls-remote per repository and branch, however many deployments track it.
    const heads = new Map<string, { head: Promise<string | null>; readAt: string }>();
    let created = 0;
    for (const deployment of deployments) {
      if (this.#stopped) break;
      const branch = trackedBranch(deployment.source_revision_config.repo_ref);
      const repoUrl = deployment.source_config.repo_url;
      if (!branch || !repoUrl) continue;
      const integration = deployment.source_config.integration_id ? await store.getIntegrationById(deployment.source_config.integration_id) : null;
      if (integrationBlock(deployment, integration)) continue;
      const key = `${repoUrl}\n${branch}`;
      if (!heads.has(key)) heads.set(key, { head: readHead(repoUrl, branch), readAt: this.#deps.clock.now() });
      const read = heads.get(key)!;
      let head: string | null;
      try {
        head = await read.head;
      } catch (error) {
        log.warn('reconciler: could not read the branch head', { deployment_id: deployment.id, repo_url: repoUrl, branch, error: String(error) });
        continue;
      }
      if (!head) continue;
      if (await this.#reconcile(deployment, branch, head, read.readAt)) created += 1;
    }
    return created;
  }

  async #reconcile(deployment: DeploymentRecord, branch: string, head: string, headReadAt: string): Promise<boolean> {
    const { webhookStore, builds, clock, log } = this.#deps;
    const newest = deployment.source_revision_config.repo_commit_sha;
    const ref = deployment.source_revision_config.repo_ref!;
    if (newest === head) {
      await webhookStore.setReconcileHead(deployment.id, ref, head, clock.now());
      return false;
    }
    const seen = await webhookStore.getReconcileHead(deployment.id);
    // Handled already: built, or skipped on purpose by a webhook (a skip marker).
    if (seen && seen.repo_ref === ref && seen.sha === head) return false;
    // A webhook handled a push of this branch after our head was read: ours may be older; the next
    // pass decides with a fresh read, so an older commit never replaces a newer one.
    if (seen && seen.repo_ref === ref && seen.seen_at > headReadAt) return false;
    if (newest === null) {
      if (!seen || seen.repo_ref !== ref) {
        await webhookStore.setReconcileHead(deployment.id, ref, head, clock.now());
        log.info('reconciler: first look at the branch; its head is taken as built by the newest revision', { deployment_id: deployment.id, branch, head });
        return false;
      }
    }
    const result = await builds.build(deployment.id, head, 'reconciler');
    await webhookStore.setReconcileHead(deployment.id, ref, head, clock.now());
    if (result.outcome !== 'created') return false;
    log.info('reconciler: built a push that no webhook reported', { deployment_id: deployment.id, branch, commit: head, revision_id: result.revision.id });
    return true;
  }
}
