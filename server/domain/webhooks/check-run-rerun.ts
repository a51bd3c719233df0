import { machineAuditEntry, requestScope, withAuditEntry } from '../../lib/request-scope.ts';
import type { Store } from '../../store/types.ts';
import type { DeliveryResultLine, WebhookStore } from '../../store/webhooks.ts';
import type { Deployments } from '../deployments.ts';
import { DomainError } from '../errors.ts';
import type { ProcessOutcome } from './process-delivery.ts';

/** The fields of a `check_run` delivery this reads; anything else in it is ignored. */
export type CheckRunPayload = {
  action?: unknown;
  check_run?: { id?: unknown; external_id?: unknown; name?: unknown };
  installation?: { id?: unknown };
};

/**
 * GitHub's "Re-run" on a `deploy/<name>` check run (`check_run.rerequested`, contract §19):
 * redeploys the revision the check run reports (its `external_id`) as a new revision, as
 * `POST …/revisions/{id}/redeploy` does. Only a revision of a deployment whose integration is the
 * delivery's installation, in a workspace that linked it, is touched.
 */
export class CheckRunRerun {
  readonly #deps: {
    store: Pick<Store, 'getDeploymentById' | 'getIntegrationById' | 'getRevisionById' | 'getWorkspace'>;
    deployments: Pick<Deployments, 'redeploy'>;
    installations: Pick<WebhookStore, 'tenantsOfInstallation'>;
  };

  constructor(deps: {
    store: Pick<Store, 'getDeploymentById' | 'getIntegrationById' | 'getRevisionById' | 'getWorkspace'>;
    deployments: Pick<Deployments, 'redeploy'>;
    installations: Pick<WebhookStore, 'tenantsOfInstallation'>;
  }) {
    this.#deps = deps;
  }

  async handle(payload: CheckRunPayload): Promise<ProcessOutcome> {
    const { store, deployments, installations } = this.#deps;
    const ignored = (reason: string): ProcessOutcome => ({ outcome: 'ignored', reason, results: [] });
    if (payload.action !== 'rerequested') return ignored(`check_run ${String(payload.action)} needs nothing from this server (it acts on rerequested).`);
    const revisionId = payload.check_run?.external_id;
    const installationId = payload.installation?.id;
    if (typeof revisionId !== 'string' || typeof installationId !== 'number') return ignored('The check run names no revision or no installation.');
    const revision = await store.getRevisionById(revisionId).catch(() => null);
    const deployment = revision ? await store.getDeploymentById(revision.deployment_id) : null;
    const integration = deployment?.source_config.integration_id ? await store.getIntegrationById(deployment.source_config.integration_id) : null;
    const linked = new Set(await installations.tenantsOfInstallation(installationId));
    if (!revision || !deployment || integration?.installation_id !== installationId || !linked.has(deployment.tenant_id))
      return ignored('The check run is not one of a deployment of this installation.');
    const line: Omit<DeliveryResultLine, 'result' | 'revision_id' | 'reason'> = {
      tenant_id: deployment.tenant_id,
      deployment_id: deployment.id,
      deployment_name: deployment.name,
      integration_id: integration.id,
    };
    try {
      const redeploy = () => deployments.redeploy(deployment.tenant_id, deployment.id, revision.id);
      const actor = requestScope()?.actor;
      const workspace = actor ? await store.getWorkspace(deployment.tenant_id) : null;
      // Audited as the delivery's, in the redeploy's transaction, as an API key's redeploy is.
      const redeployed =
        actor && workspace
          ? await withAuditEntry(
              machineAuditEntry({
                actor,
                organizationId: workspace.organization_id,
                workspaceId: deployment.tenant_id,
                action: 'redeploy',
                resourceType: 'revision',
                resourceId: revision.id,
                now: new Date().toISOString(),
              }),
              redeploy,
            )
          : await redeploy();
      return {
        outcome: 'applied',
        reason: null,
        results: [{ ...line, result: 'revision_created', revision_id: redeployed.latest_revision_id, reason: `Re-run of revision ${revision.id} on GitHub.` }],
      };
    } catch (error) {
      if (!(error instanceof DomainError)) throw error;
      return { outcome: 'applied', reason: null, results: [{ ...line, result: 'skipped', revision_id: null, reason: error.message }] };
    }
  }
}
