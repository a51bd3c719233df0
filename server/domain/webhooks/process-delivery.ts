import type { EmitterWebhookEvent } from '@octokit/webhooks';
import type { Clock } from '../../lib/clock.ts';
import { requestScope } from '../../lib/request-scope.ts';
import type { DeploymentRecord, IntegrationRecord, Store } from '../../store/types.ts';
import type { DeliveryResultLine, StoredOutcome, WebhookStore } from '../../store/webhooks.ts';
import type { CheckRunPayload, CheckRunRerun } from './check-run-rerun.ts';
import { deploymentSkip, type PushPayload, pushFacts, pushProblem, pushWideSkip } from './match-push.ts';
import type { Previews, PullRequestPayload } from './previews.ts';
import type { PushBuilds } from './push-builds.ts';

type InstallationPayload = EmitterWebhookEvent<'installation'>['payload'];

/** Where the branch heads a webhook handled are recorded, so the reconciler does not redo them. */
export type HeadsSeen = Pick<WebhookStore, 'setReconcileHead'>;
/** Which workspaces linked an installation: those an App delivery naming it is addressed to. */
export type InstallationLinks = Pick<WebhookStore, 'tenantsOfInstallation'>;
/** Records the repositories an installation was granted, as its deliveries report them. */
export type InstallationRepoRecorder = { recordFromDelivery(event: string, payload: unknown): Promise<void> };

export type ProcessOutcome = { outcome: StoredOutcome; reason: string | null; results: DeliveryResultLine[] };

/** Turns one stored delivery into its effects: revisions for a push, integration changes for an installation event. */
export class DeliveryProcessor {
  readonly #deps: {
    store: Pick<Store, 'getIntegrationById' | 'listDeploymentsByRepo' | 'removeInstallation' | 'setInstallationSuspended'>;
    builds: PushBuilds;
    clock: Clock;
    heads: HeadsSeen;
    installations: InstallationLinks;
    repos?: InstallationRepoRecorder;
    previews?: Previews;
    rerun?: CheckRunRerun;
  };

  /** `previews`: pull-request previews (with GitHub App settings); without it `pull_request` events are ignored. */
  constructor(deps: {
    store: Pick<Store, 'getIntegrationById' | 'listDeploymentsByRepo' | 'removeInstallation' | 'setInstallationSuspended'>;
    builds: PushBuilds;
    clock: Clock;
    heads: HeadsSeen;
    installations: InstallationLinks;
    repos?: InstallationRepoRecorder;
    previews?: Previews;
    /** GitHub's "Re-run" of a check run (with GitHub App settings); without it `check_run` events are ignored. */
    rerun?: CheckRunRerun;
  }) {
    this.#deps = deps;
  }

  /**
   * `workspaceId`: the workspace a repository-webhook delivery was verified for, or null for the
   * GitHub App's. Either way only the workspaces the delivery is addressed to are considered: no
   * other workspace gets a revision, a result line or a trace in its log.
   */
  async process(event: string, payload: unknown, workspaceId: string | null): Promise<ProcessOutcome> {
    if (payload === null || typeof payload !== 'object' || Array.isArray(payload)) {
      return { outcome: 'ignored', reason: 'The body is not a JSON object.', results: [] };
    }
    // The repositories GET /v1/integrations/github/{id}/repos lists. Only the App's deliveries speak
    // for an installation: a workspace's repository webhook could otherwise add repositories to one it does not own.
    if (workspaceId === null) await this.#deps.repos?.recordFromDelivery(event, payload);
    if (event === 'push') return this.#push(payload as PushPayload, workspaceId);
    if (event === 'pull_request' && this.#deps.previews) return this.#pullRequest(payload as PullRequestPayload, workspaceId);
    if (event === 'check_run' && this.#deps.rerun) {
      // Only the App's own deliveries: a workspace's repository webhook cannot redeploy another's revision.
      if (workspaceId !== null) return { outcome: 'ignored', reason: 'check_run events are taken only from the GitHub App.', results: [] };
      return this.#deps.rerun.handle(payload as CheckRunPayload);
    }
    if (event === 'installation') {
      // A workspace's secret proves only that the workspace sent it: it must not unlink or suspend anyone's integrations.
      if (workspaceId !== null) {
        return {
          outcome: 'ignored',
          reason: "installation events are taken only from the GitHub App (signed with the server's secret), not from a workspace's repository webhook.",
          results: [],
        };
      }
      return this.#installation(payload as InstallationPayload);
    }
    return { outcome: 'ignored', reason: `The ${event} event is not used by this server (it acts on push and installation).`, results: [] };
  }

  async #push(payload: PushPayload, workspaceId: string | null): Promise<ProcessOutcome> {
    const { store, builds } = this.#deps;
    const problem = pushProblem(payload);
    const facts = problem ? null : pushFacts(payload);
    if (!facts) return { outcome: 'push', reason: problem ?? 'The push payload lacks ref, after or repository.', results: [] };

    let addressed: Set<string>;
    if (workspaceId !== null) {
      addressed = new Set([workspaceId]);
    } else if (facts.installationId !== null) {
      addressed = new Set(await this.#deps.installations.tenantsOfInstallation(facts.installationId));
    } else {
      return {
        outcome: 'ignored',
        reason:
          "Signed with the GitHub App's secret but names no installation: it is addressed to no workspace. Repository webhooks deliver to their workspace's own URL with its own secret.",
        results: [],
      };
    }

    const byId = new Map<string, DeploymentRecord>();
    for (const key of facts.repoKeys) {
      for (const d of await store.listDeploymentsByRepo(key)) if (addressed.has(d.tenant_id)) byId.set(d.id, d);
    }
    if (byId.size === 0) return { outcome: 'push', reason: `No github deployment tracks the repository ${facts.repository}.`, results: [] };

    const wide = pushWideSkip(facts);
    const results: DeliveryResultLine[] = [];
    let first = true;
    for (const deployment of byId.values()) {
      // The store is synchronous under its promises: between deployments, let waiting requests in,
      // so a push to a repository many deployments track never holds the event loop for all of them.
      if (!first) await new Promise<void>((resolve) => setImmediate(resolve));
      first = false;
      const line = {
        tenant_id: deployment.tenant_id,
        deployment_id: deployment.id,
        deployment_name: deployment.name,
        integration_id: deployment.source_config.integration_id ?? null,
      };
      const integration: IntegrationRecord | null = line.integration_id ? await store.getIntegrationById(line.integration_id) : null;
      const own = deploymentSkip(deployment, integration, facts);
      const skip = wide ?? own;
      // A push of this deployment's branch that it would build, built here or skipped on purpose (a
      // skip marker): the reconciler must not build that head later. A build records it in the
      // transaction that makes the revision.
      const branchPush = !facts.deleted && facts.ref.startsWith('refs/heads/');
      const headSeen = own === null && branchPush ? { repoRef: deployment.source_revision_config.repo_ref! } : undefined;
      if (skip) {
        if (headSeen) await this.#deps.heads.setReconcileHead(deployment.id, headSeen.repoRef, facts.after, this.#deps.clock.now());
        results.push({ ...line, result: 'skipped', revision_id: null, reason: skip });
        continue;
      }
      const built = await builds.build(deployment.id, facts.after, 'webhook', headSeen);
      if (built.outcome === 'created') {
        results.push({ ...line, result: 'revision_created', revision_id: built.revision.id, reason: null });
      } else if (built.outcome === 'exists') {
        results.push({
          ...line,
          result: 'skipped',
          revision_id: built.revisionId,
          reason: `Commit ${facts.after.slice(0, 12)} already has revision ${built.revisionId} (${built.status}) of this deployment.`,
        });
      } else {
        results.push({ ...line, result: 'skipped', revision_id: null, reason: `Not built: ${built.reason}.` });
      }
    }
    return { outcome: 'push', reason: wide, results };
  }

  /** Pull-request previews, for the same workspaces a push would be addressed to. */
  async #pullRequest(payload: PullRequestPayload, workspaceId: string | null): Promise<ProcessOutcome> {
    const installationId = payload.installation?.id;
    let addressed: Set<string>;
    if (workspaceId !== null) addressed = new Set([workspaceId]);
    else if (typeof installationId === 'number') addressed = new Set(await this.#deps.installations.tenantsOfInstallation(installationId));
    else return { outcome: 'ignored', reason: "Signed with the GitHub App's secret but names no installation: it is addressed to no workspace.", results: [] };
    const { reason, results } = await this.#deps.previews!.handle(payload, addressed);
    return { outcome: 'push', reason, results };
  }

  async #installation(payload: InstallationPayload): Promise<ProcessOutcome> {
    const { store, clock } = this.#deps;
    const installationId = payload.installation?.id;
    if (typeof installationId !== 'number') return { outcome: 'ignored', reason: 'The installation event names no installation.', results: [] };
    let changed: IntegrationRecord[];
    let result: DeliveryResultLine['result'];
    let reason: string;
    // Audited as the delivery's (the worker's scope names it), in each change's transaction.
    const actor = requestScope()?.actor;
    const audit = actor ? { actor, now: clock.now() } : undefined;
    switch (payload.action) {
      case 'deleted':
        changed = await store.removeInstallation(installationId, audit);
        result = 'integration_removed';
        reason = `Installation ${installationId} was deleted on GitHub: the integration is removed and its deployments get no push builds.`;
        break;
      case 'suspend':
        changed = await store.setInstallationSuspended(installationId, clock.now(), audit);
        result = 'integration_suspended';
        reason = `Installation ${installationId} was suspended on GitHub: its deployments get no push builds until it is unsuspended.`;
        break;
      case 'unsuspend':
        changed = await store.setInstallationSuspended(installationId, null, audit);
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
