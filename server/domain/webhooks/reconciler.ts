import { repositoryOnHost } from '../../../shared/repo-url.ts';
import type { BranchHeadReader } from '../../git/ls-remote.ts';
import { type RemotePolicy, reconcileTarget } from '../../git/remote-policy.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../logger.ts';
import type { DeploymentRecord, Store } from '../../store/types.ts';
import type { WebhookStore } from '../../store/webhooks.ts';
import type { RepositoryAccess } from '../repository-access.ts';
import { integrationBlock, trackedBranch } from './match-push.ts';
import type { PushBuilds } from './push-builds.ts';

export type ReconcilerDeps = {
  store: Pick<Store, 'getDeployment' | 'getIntegrationById' | 'listBuildOnPushDeployments'>;
  webhookStore: WebhookStore;
  builds: PushBuilds;
  readHead: BranchHeadReader;
  /** Which hosts may be contacted (`RECONCILE_ALLOWED_HOSTS`, `ALLOW_FILE_REPO_URLS`). */
  policy: RemotePolicy;
  /** `RECONCILE_CONCURRENCY`: reads at once; one workspace takes at most a quarter of them. */
  concurrency: number;
  clock: Clock;
  log: Logger;
  /** `RECONCILE_INTERVAL_MS`; 0 turns the reconciler off. */
  intervalMs: number;
  /**
   * Whether this process runs the scheduled passes now: one process at a time among those on one
   * database (a PostgreSQL advisory lock; always true on SQLite). Absent: always.
   */
  lead?: () => Promise<boolean>;
  /** Installation tokens for private repositories on the GitHub App's host; absent without App settings. */
  repoAccess?: RepositoryAccess;
};

/**
 * One `git ls-remote`: a repository URL and branch, and the deployments that track it.
 * `integrationId`: read with that integration's installation token (a repository on the App's host).
 */
type WorkItem = { key: string; tenantId: string; url: string; branch: string; integrationId: string | null; deployments: DeploymentRecord[] };

/**
 * Webhooks are a hint, not a guarantee: every `intervalMs` this compares the head of each
 * `build_on_push` deployment's branch (`git ls-remote`) with the commit of its newest revision and
 * creates the missing `push` revision. A newest revision with no known commit (built from the
 * branch name at create or PATCH time) is taken to have built the head seen on the first look; a
 * later, different head is built once two passes in a row have found it with no webhook handling it.
 *
 * Tenants name the URLs, so reads are contained: only allowed hosts are contacted, reads run
 * concurrently up to `concurrency` with a per-workspace share, workspaces take turns in the queue,
 * and a pass never waits for an earlier pass's slow reads (a URL still being read is skipped), so
 * one workspace's unreachable URLs cannot hold up everyone else's.
 */
export class Reconciler {
  readonly #deps: ReconcilerDeps;
  readonly #perTenant: number;
  #timer: NodeJS.Timeout | null = null;
  #stopped = true;
  /** Work items queued or being read. */
  readonly #inFlight = new Set<string>();
  readonly #queue: Array<{ item: WorkItem; run: () => Promise<void> }> = [];
  #running = 0;
  readonly #runningByTenant = new Map<string, number>();
  #listing = false;
  /** Whether the last scheduled pass found this process leading (null before the first): logged when it changes. */
  #leading: boolean | null = null;
  /**
   * Heads no webhook has reported, by deployment, as the last pass found them: built only when a
   * later pass finds the same head still unhandled. A push's webhook usually follows it within
   * seconds, and only the webhook carries the commit message (a skip marker) the reconciler cannot
   * read, so a pass that lands between a push and its webhook must leave the decision to the webhook.
   */
  readonly #unreported = new Map<string, { ref: string; sha: string }>();
  /** URLs already reported as not contacted (reported once at warn level, not at every pass). */
  readonly #refusedReported = new Set<string>();

  constructor(deps: ReconcilerDeps) {
    this.#deps = deps;
    this.#perTenant = Math.max(1, Math.floor(deps.concurrency / 4));
  }

  start(): void {
    if (this.#deps.intervalMs === 0) return;
    this.#stopped = false;
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    // Queued reads are dropped (a later start lists them again); running ones end on their own.
    for (const queued of this.#queue) this.#inFlight.delete(queued.item.key);
    this.#queue.length = 0;
  }

  /** A pass every `intervalMs`; reads still running from earlier passes are left to finish, not awaited. */
  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#passIfLeading().catch((error: unknown) => this.#deps.log.error('reconciler: pass failed', { error: String(error) }));
      this.#schedule();
    }, this.#deps.intervalMs);
    this.#timer.unref();
  }

  /** A scheduled pass, run only by the process that leads (asked at every pass: a dead leader is replaced at the next one). */
  async #passIfLeading(): Promise<number> {
    const leading = this.#deps.lead ? await this.#deps.lead() : true;
    if (leading !== this.#leading) {
      this.#leading = leading;
      if (leading) this.#deps.log.info('reconciler: this process runs the reconciler passes now');
      else this.#deps.log.info('reconciler: another process runs the reconciler passes; this one stands by');
    }
    if (!leading || this.#stopped) return 0;
    return this.pass();
  }

  /**
   * One comparison of every `build_on_push` deployment whose URL is not still being read; answers,
   * once this pass's reads are done, how many revisions it created.
   */
  async pass(): Promise<number> {
    // Two listings at once would both queue the URLs neither had queued yet.
    if (this.#listing) return 0;
    this.#listing = true;
    let items: WorkItem[];
    try {
      items = await this.#workItems();
    } finally {
      this.#listing = false;
    }
    const done = items.map(
      (item) =>
        new Promise<number>((resolve) => {
          this.#inFlight.add(item.key);
          this.#queue.push({
            item,
            run: () =>
              this.#read(item).then(resolve, (error: unknown) => {
                this.#deps.log.error('reconciler: reconciling a repository failed', { repo_url: item.url, branch: item.branch, error: String(error) });
                resolve(0);
              }),
          });
        }),
    );
    this.#pump();
    return (await Promise.all(done)).reduce((a, b) => a + b, 0);
  }

  /** This pass's reads: one per repository URL and branch, workspaces taking turns. */
  async #workItems(): Promise<WorkItem[]> {
    const { store, policy, log } = this.#deps;
    const byKey = new Map<string, WorkItem>();
    const deployments = await store.listBuildOnPushDeployments();
    // Forget the unreported heads of deployments that no longer build on push (or are gone).
    const tracked = new Set(deployments.map((d) => d.id));
    for (const id of this.#unreported.keys()) if (!tracked.has(id)) this.#unreported.delete(id);
    for (const deployment of deployments) {
      const branch = trackedBranch(deployment.source_revision_config.repo_ref);
      const repoUrl = deployment.source_config.repo_url;
      if (!branch || !repoUrl) continue;
      const integration = deployment.source_config.integration_id ? await store.getIntegrationById(deployment.source_config.integration_id) : null;
      if (integrationBlock(deployment, integration)) continue;
      // A private repository's head is read with, and shared only among, deployments of one
      // integration: another workspace naming the same URL learns nothing through this read.
      const withToken =
        this.#deps.repoAccess && policy.githubUrl && repositoryOnHost(repoUrl, policy.githubUrl) ? deployment.source_config.integration_id : null;
      const key = withToken ? `${repoUrl}\n${branch}\n${withToken}` : `${repoUrl}\n${branch}`;
      if (this.#inFlight.has(key)) continue;
      const existing = byKey.get(key);
      if (existing) {
        existing.deployments.push(deployment);
        continue;
      }
      const target = reconcileTarget(repoUrl, policy);
      if (!target.ok) {
        const fields = { deployment_id: deployment.id, repo_url: repoUrl, reason: target.reason };
        if (this.#refusedReported.has(key)) log.debug('reconciler: repository not contacted', fields);
        else log.warn('reconciler: repository not contacted', fields);
        this.#refusedReported.add(key);
        continue;
      }
      byKey.set(key, { key, tenantId: deployment.tenant_id, url: target.url, branch, integrationId: withToken, deployments: [deployment] });
    }
    // Round robin over workspaces: each one's first repository comes before anyone's second.
    const byTenant = new Map<string, WorkItem[]>();
    for (const item of byKey.values()) byTenant.set(item.tenantId, [...(byTenant.get(item.tenantId) ?? []), item]);
    const lists = [...byTenant.values()];
    const ordered: WorkItem[] = [];
    for (let i = 0; ordered.length < byKey.size; i++) for (const list of lists) if (list[i]) ordered.push(list[i]!);
    return ordered;
  }

  /** Starts queued reads while there are free slots, skipping workspaces that have used their share. */
  #pump(): void {
    const { concurrency } = this.#deps;
    for (let i = 0; i < this.#queue.length && this.#running < concurrency && !this.#stopped; ) {
      const next = this.#queue[i]!;
      const tenant = next.item.tenantId;
      if ((this.#runningByTenant.get(tenant) ?? 0) >= this.#perTenant) {
        i++;
        continue;
      }
      this.#queue.splice(i, 1);
      this.#running++;
      this.#runningByTenant.set(tenant, (this.#runningByTenant.get(tenant) ?? 0) + 1);
      void next.run().finally(() => {
        this.#running--;
        const left = (this.#runningByTenant.get(tenant) ?? 1) - 1;
        if (left === 0) this.#runningByTenant.delete(tenant);
        else this.#runningByTenant.set(tenant, left);
        this.#inFlight.delete(next.item.key);
        this.#pump();
      });
    }
  }

  /** Reads one branch head and reconciles the deployments that track it; answers how many revisions it created. */
  async #read(item: WorkItem): Promise<number> {
    const { store, readHead, clock, log } = this.#deps;
    const readAt = clock.now();
    let head: string | null;
    try {
      const credentials = item.integrationId ? await this.#deps.repoAccess!.credentials(item.url, item.integrationId) : null;
      head = credentials ? await readHead(credentials.url, item.branch, credentials.token) : await readHead(item.url, item.branch);
    } catch (error) {
      log.warn('reconciler: could not read the branch head', {
        deployment_ids: item.deployments.map((d) => d.id),
        repo_url: item.url,
        branch: item.branch,
        error: String(error),
      });
      return 0;
    }
    if (!head || this.#stopped) return 0;
    let created = 0;
    for (const listed of item.deployments) {
      // The read may have taken a while: decide on the deployment as it is now.
      const deployment = await store.getDeployment(listed.tenant_id, listed.id);
      if (
        !deployment ||
        deployment.status === 'AWAITING_DELETE' ||
        !deployment.source_config.build_on_push ||
        deployment.source_config.repo_url !== listed.source_config.repo_url
      )
        continue;
      if (trackedBranch(deployment.source_revision_config.repo_ref) !== item.branch) continue;
      if (await this.#reconcile(deployment, item.branch, head, readAt)) created += 1;
    }
    return created;
  }

  async #reconcile(deployment: DeploymentRecord, branch: string, head: string, headReadAt: string): Promise<boolean> {
    const { webhookStore, builds, clock, log } = this.#deps;
    const newest = deployment.source_revision_config.repo_commit_sha;
    const ref = deployment.source_revision_config.repo_ref!;
    if (newest === head) {
      this.#unreported.delete(deployment.id);
      await webhookStore.setReconcileHead(deployment.id, ref, head, clock.now());
      return false;
    }
    const seen = await webhookStore.getReconcileHead(deployment.id);
    // Handled already: built, or skipped on purpose by a webhook (a skip marker).
    if (seen && seen.repo_ref === ref && seen.sha === head) {
      this.#unreported.delete(deployment.id);
      return false;
    }
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
    const unreported = this.#unreported.get(deployment.id);
    if (!unreported || unreported.ref !== ref || unreported.sha !== head) {
      this.#unreported.set(deployment.id, { ref, sha: head });
      log.info('reconciler: a head no webhook has reported; built if the next pass still finds it unhandled', { deployment_id: deployment.id, branch, head });
      return false;
    }
    this.#unreported.delete(deployment.id);
    const result = await builds.build(deployment.id, head, 'reconciler', { repoRef: ref });
    if (result.outcome !== 'created') return false;
    log.info('reconciler: built a push that no webhook reported', { deployment_id: deployment.id, branch, commit: head, revision_id: result.revision.id });
    return true;
  }
}
