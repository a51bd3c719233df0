import { normalizeRepoUrl } from '../../../shared/repo-url.ts';
import type { PreviewSettings } from '../../../shared/schemas/deployment.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../logger.ts';
import type { GithubStore } from '../../store/github.ts';
import type { DeploymentRecord, Store } from '../../store/types.ts';
import type { DeliveryResultLine } from '../../store/webhooks.ts';
import { type Deployments, previewOfDeployment } from '../deployments.ts';
import { Conflict, DomainError } from '../errors.ts';
import { integrationBlock } from './match-push.ts';
import type { PushBuilds } from './push-builds.ts';

/** The fields of a `pull_request` delivery this reads. */
export type PullRequestPayload = {
  action?: string;
  number?: number;
  label?: { name?: string };
  installation?: { id?: number };
  repository?: { full_name?: string; html_url?: string; clone_url?: string; ssh_url?: string };
  pull_request?: {
    number?: number;
    labels?: Array<{ name?: string }>;
    head?: { sha?: string; ref?: string; repo?: { full_name?: string } | null };
    base?: { repo?: { full_name?: string } };
  };
};

/** Tells the pull request why no preview was made (a commit status on its head); best effort. */
export type PreviewRefusal = (parent: DeploymentRecord, headSha: string, context: string, description: string) => Promise<void>;

const BUILD_ACTIONS = new Set(['opened', 'reopened', 'synchronize']);

/**
 * Pull-request previews (contract §12): for each `pull_request` event of a branch of the same
 * repository, a child deployment `<name>-pr-<number>` of every deployment with
 * `source_config.preview`, built from the pull request's head commit with a snapshot of the
 * parent's secrets; torn down when the pull request closes, when it has been idle for
 * `idle_ttl_hours`, or when the parent goes. A fork's pull request never builds (its code would
 * receive the secrets); past `max_concurrent`, a new preview is refused with a status saying why.
 */
type PreviewsDeps = {
  store: Pick<Store, 'getDeploymentById' | 'getIntegrationById' | 'listDeploymentsByRepo'>;
  deployments: Deployments;
  builds: PushBuilds;
  github: GithubStore;
  clock: Clock;
  log: Logger;
  refuse?: PreviewRefusal;
};

export class Previews {
  readonly #deps: PreviewsDeps;

  constructor(deps: PreviewsDeps) {
    this.#deps = deps;
  }

  /** One `pull_request` delivery, for the workspaces it is addressed to. */
  async handle(payload: PullRequestPayload, addressed: Set<string>): Promise<{ reason: string | null; results: DeliveryResultLine[] }> {
    const pr = payload.pull_request;
    const number = payload.number ?? pr?.number;
    const action = payload.action ?? '';
    const headSha = pr?.head?.sha;
    const headRef = pr?.head?.ref;
    if (!pr || typeof number !== 'number' || !headSha || !/^[0-9a-f]{40}$/.test(headSha) || !headRef)
      return { reason: 'The pull_request payload lacks its number or head.', results: [] };
    const base = pr.base?.repo?.full_name ?? payload.repository?.full_name;
    if (action !== 'closed' && (!pr.head?.repo || pr.head.repo.full_name !== base)) {
      return {
        reason: `Pull request #${number} comes from a fork (${pr.head?.repo?.full_name ?? 'a deleted repository'}): never built, its code would receive the secrets.`,
        results: [],
      };
    }
    const repository = payload.repository ?? {};
    const keys = [
      ...new Set([repository.html_url, repository.clone_url, repository.ssh_url].filter((u): u is string => typeof u === 'string').map(normalizeRepoUrl)),
    ];
    const parents = new Map<string, DeploymentRecord>();
    for (const key of keys) {
      for (const d of await this.#deps.store.listDeploymentsByRepo(key)) {
        if (addressed.has(d.tenant_id) && d.source_config.preview && !previewOfDeployment(d) && d.status !== 'AWAITING_DELETE') parents.set(d.id, d);
      }
    }
    if (parents.size === 0) return { reason: `No deployment with previews tracks ${base ?? 'the repository'}.`, results: [] };
    const results: DeliveryResultLine[] = [];
    for (const parent of parents.values()) {
      const integration = parent.source_config.integration_id ? await this.#deps.store.getIntegrationById(parent.source_config.integration_id) : null;
      const blocked =
        integrationBlock(parent, integration) ??
        (payload.installation?.id !== undefined && integration?.installation_id !== payload.installation.id
          ? 'The delivery names another installation.'
          : null);
      const line = {
        tenant_id: parent.tenant_id,
        deployment_id: parent.id,
        deployment_name: parent.name,
        integration_id: parent.source_config.integration_id ?? null,
      };
      if (blocked) {
        results.push({ ...line, result: 'skipped', revision_id: null, reason: blocked });
        continue;
      }
      results.push(
        await this.#forParent(parent, parent.source_config.preview!, line, {
          action,
          number,
          headSha,
          headRef,
          labels: (pr.labels ?? []).map((l) => l.name ?? ''),
          label: payload.label?.name,
        }),
      );
    }
    return { reason: null, results };
  }

  async #forParent(
    parent: DeploymentRecord,
    settings: PreviewSettings,
    line: Omit<DeliveryResultLine, 'result' | 'revision_id' | 'reason'>,
    event: { action: string; number: number; headSha: string; headRef: string; labels: string[]; label: string | undefined },
  ): Promise<DeliveryResultLine> {
    const { github, deployments, builds, clock, log } = this.#deps;
    const existing = await github.previewFor(parent.id, event.number);
    const skipped = (reason: string): DeliveryResultLine => ({ ...line, result: 'skipped', revision_id: null, reason });
    if (event.action === 'closed') {
      if (!existing) return skipped(`Pull request #${event.number} closed; it had no preview.`);
      await this.#tearDown(existing.deployment_id, parent.tenant_id, `pull request #${event.number} closed`);
      return skipped(`Pull request #${event.number} closed: its preview is torn down.`);
    }
    const wanted =
      settings.trigger === 'pull_request'
        ? BUILD_ACTIONS.has(event.action)
        : (event.action === 'labeled' && event.label === settings.label) || (BUILD_ACTIONS.has(event.action) && event.labels.includes(settings.label ?? ''));
    if (!wanted)
      return skipped(`pull_request.${event.action} builds no preview here (trigger ${settings.trigger}${settings.label ? ` '${settings.label}'` : ''}).`);
    const now = clock.now();
    if (existing) {
      await github.touchPreview(existing.deployment_id, now);
      const built = await builds.build(existing.deployment_id, event.headSha, 'webhook');
      if (built.outcome === 'created')
        return {
          ...line,
          deployment_id: existing.deployment_id,
          result: 'revision_created',
          revision_id: built.revision.id,
          reason: `Preview of pull request #${event.number}.`,
        };
      return skipped(built.outcome === 'exists' ? `Commit ${event.headSha.slice(0, 12)} already has a preview revision.` : `Not built: ${built.reason}.`);
    }
    const context = `deploy/${parent.name}-pr-${event.number}`;
    if (settings.max_concurrent && (await github.previewsOf(parent.id)).length >= settings.max_concurrent) {
      const why = `No preview: ${parent.name} already has ${settings.max_concurrent} (max_concurrent). Close a pull request or raise the limit.`;
      await this.#deps
        .refuse?.(parent, event.headSha, context, why)
        .catch((error: unknown) =>
          log.warn('previews: could not tell the pull request why it has no preview', { deployment_id: parent.id, error: String(error) }),
        );
      return skipped(why);
    }
    let child: DeploymentRecord;
    try {
      child = await deployments.create(
        parent.tenant_id,
        {
          name: `${parent.name}-pr-${event.number}`,
          source: 'github',
          source_config: {
            integration_id: parent.source_config.integration_id!,
            repo_url: parent.source_config.repo_url!,
            deployment_type: parent.source_config.deployment_type,
            build_on_push: false,
            install_command: parent.source_config.install_command,
            build_command: parent.source_config.build_command,
          },
          source_revision_config: { repo_ref: event.headRef, graph_config_path: parent.source_revision_config.graph_config_path },
          // A snapshot: later changes to the parent's secrets do not reach an existing preview.
          secrets: parent.secrets.map((s) => ({ name: s.name, value: s.value })),
        },
        { previewOf: { parent_deployment_id: parent.id, pull_request: event.number }, commitSha: event.headSha },
      );
    } catch (error) {
      if (error instanceof Conflict || error instanceof DomainError) return skipped(`No preview: ${error.message}`);
      throw error;
    }
    await github.recordPreview({
      deployment_id: child.id,
      parent_deployment_id: parent.id,
      tenant_id: parent.tenant_id,
      pull_request: event.number,
      last_activity_at: now,
      created_at: now,
    });
    log.info('previews: preview created', { deployment_id: child.id, parent_deployment_id: parent.id, pull_request: event.number });
    return {
      ...line,
      deployment_id: child.id,
      deployment_name: child.name,
      result: 'revision_created',
      revision_id: child.latest_revision_id,
      reason: `Preview of pull request #${event.number}.`,
    };
  }

  /** Tears down previews idle past their parent's `idle_ttl_hours`, and those whose parent is gone; answers how many. */
  async sweep(): Promise<number> {
    const { github, store, clock } = this.#deps;
    const now = Date.parse(clock.now());
    let removed = 0;
    for (const preview of await github.allPreviews()) {
      const parent = await store.getDeploymentById(preview.parent_deployment_id);
      let why: string | null = null;
      if (!parent || parent.status === 'AWAITING_DELETE') why = 'its parent deployment was deleted';
      else if (
        parent.source_config.preview?.idle_ttl_hours &&
        now - Date.parse(preview.last_activity_at) > parent.source_config.preview.idle_ttl_hours * 3_600_000
      ) {
        why = `no pull-request activity for ${parent.source_config.preview.idle_ttl_hours} h`;
      }
      if (!why) continue;
      await this.#tearDown(preview.deployment_id, preview.tenant_id, why);
      removed += 1;
    }
    return removed;
  }

  async #tearDown(deploymentId: string, tenantId: string, why: string): Promise<void> {
    try {
      await this.#deps.deployments.delete(tenantId, deploymentId, true);
    } catch (error) {
      // Already gone or being deleted: nothing more to do here.
      if (!(error instanceof DomainError)) throw error;
    }
    await this.#deps.github.forgetPreview(deploymentId);
    this.#deps.log.info('previews: preview torn down', { deployment_id: deploymentId, why });
  }
}
