import type { EmitterWebhookEvent } from '@octokit/webhooks';
import type { DeliveryResultLine, StoredOutcome, WebhookStore } from '../../store/webhooks.ts';
import type { DeploymentRecord, IntegrationRecord, Store } from '../../store/types.ts';
import type { Clock } from '../clock.ts';
import { deploymentSkip, pushFacts, pushWideSkip, type PushPayload } from './match-push.ts';
import type { PushBuilds } from './push-builds.ts';

type InstallationPayload = EmitterWebhookEvent<'installation'>['payload'];

/** Where the branch heads a webhook handled are recorded, so the reconciler does not redo them. */
export type HeadsSeen = Pick<WebhookStore, 'setReconcileHead'>;

export type ProcessOutcome = { outcome: StoredOutcome; reason: string | null; results: DeliveryResultLine[] };

/** Turns one stored delivery into its effects: revisions for a push, integration changes for an installation event. */
export class DeliveryProcessor {
  readonly #deps: { store: Store; builds: PushBuilds; clock: Clock; heads: HeadsSeen; repos?: { recordFromDelivery(event: string, payload: unknown): Promise<void> } };

  constructor(deps: { store: Store; builds: PushBuilds; clock: Clock; heads: HeadsSeen; repos?: { recordFromDelivery(event: string, payload: unknown): Promise<void> } }) {
    this.#deps = deps;
  }

  async process(event: string, payload: unknown): Promise<ProcessOutcome> {
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
      return { outcome: 'ignored', reason: 'The body is not a JSON object.', results: [] };
    }
    await this.#deps.repos?.recordFromDelivery(event, payload); // the repositories GET /v1/integrations/github/{id}/repos lists
    if (event === 'push') return this.#push(payload as PushPayload);
    if (event === 'installation') return this.#installation(payload as InstallationPayload);
    return { outcome: 'ignored', reason: `The ${event} event is not used by this server (it acts on push and installation).`, results: [] };
  }

  async #push(payload: PushPayload): Promise<ProcessOutcome> {
    const { store, builds } = this.#deps;
    const push = pushFacts(payload);
    if (!push) return { outcome: 'ignored', reason: 'The push payload lacks ref, after or repository.', results: [] };

    const byId = new Map<string, DeploymentRecord>();
    for (const key of push.repoKeys) for (const d of await store.listDeploymentsByRepo(key)) byId.set(d.id, d);
    if (byId.size === 0) return { outcome: 'push', reason: `No github deployment tracks the repository ${push.repository}.`, results: [] };

    const wide = pushWideSkip(push);
    const results: DeliveryResultLine[] = [];
    for (const deployment of byId.values()) {
      const line = { tenant_id: deployment.tenant_id, deployment_id: deployment.id, deployment_name: deployment.name, integration_id: deployment.source_config.integration_id ?? null };
      const integration: IntegrationRecord | null = line.integration_id ? await store.getIntegrationById(line.integration_id) : null;
      const own = deploymentSkip(deployment, integration, push);
      const skip = wide ?? own;
      // A push of this deployment's branch that it would build, built here or skipped on purpose (a
      // skip marker): the reconciler must not build that head later.
      const branchPush = !push.deleted && push.ref.startsWith('refs/heads/');
      if (own === null && branchPush) {
        await this.#deps.heads.setReconcileHead(deployment.id, deployment.source_revision_config.repo_ref!, push.after, this.#deps.clock.now());
      }
      if (skip) {
        results.push({ ...line, result: 'skipped', revision_id: null, reason: skip });
        continue;
      }
      const built = await builds.build(deployment.id, push.after, 'webhook');
      if (built.outcome === 'created') {
        results.push({ ...line, result: 'revision_created', revision_id: built.revision.id, reason: null });
      } else if (built.outcome === 'exists') {
        results.push({
          ...line,
          result: 'skipped',
          revision_id: built.revisionId,
          reason: `Commit ${push.after.slice(0, 12)} already has revision ${built.revisionId} (${built.status}) of this deployment.`,
        });
      } else {
        results.push({ ...line, result: 'skipped', revision_id: null, reason: `Not built: ${built.reason}.` });
      }
    }
    return { outcome: 'push', reason: wide, results };
  }

  async #installation(payload: InstallationPayload): Promise<ProcessOutcome> {
    const { store, clock } = this.#deps;
    const installationId = payload.installation?.id;
    if (typeof installationId !== 'number') return { outcome: 'ignored', reason: 'The installation event names no installation.', results: [] };
    let changed: IntegrationRecord[];
    let result: DeliveryResultLine['result'];
    let reason: string;
    switch (payload.action) {
      case 'deleted':
        changed = await store.removeInstallation(installationId);
        result = 'integration_removed';
        reason = `Installation ${installationId} was deleted on GitHub: the integration is removed and its deployments get no push builds.`;
        break;
      case 'suspend':
        changed = await store.setInstallationSuspended(installationId, clock.now());
        result = 'integration_suspended';
        reason = `Installation ${installationId} was suspended on GitHub: its deployments get no push builds until it is unsuspended.`;
        break;
      case 'unsuspend':
        changed = await store.setInstallationSuspended(installationId, null);
        result = 'integration_unsuspended';
        reason = `Installation ${installationId} was unsuspended on GitHub: push builds resume.`;
        break;
      default:
        return { outcome: 'ignored', reason: `installation.${String(payload.action)} needs nothing here.`, results: [] };
    }
    if (changed.length === 0) return { outcome: 'ignored', reason: `Installation ${installationId} is not linked to any workspace.`, results: [] };
    return {
      outcome: 'applied',
      reason: null,
      results: changed.map((integration) => ({
        tenant_id: integration.tenant_id,
        deployment_id: null,
        deployment_name: null,
        integration_id: integration.id,
        result,
        revision_id: null,
        reason,
      })),
    };
  }
}
