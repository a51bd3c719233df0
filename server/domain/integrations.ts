import type { GithubIntegration, GithubIntegrationCreate } from '../../shared/schemas/integration.ts';
import type { Clock } from '../lib/clock.ts';
import { auditSubject } from '../lib/request-scope.ts';
import type { IntegrationStore } from '../store/types.ts';
import { BadRequest, NotFound } from './errors.ts';

/** GitHub App installations linked to a workspace. */
export class Integrations {
  private readonly deps: { store: IntegrationStore; clock: Clock; provenLinksOnly?: boolean };

  /** `provenLinksOnly`: the server has GitHub App settings, so an installation is linked only through the setup URL. */
  constructor(deps: { store: IntegrationStore; clock: Clock; provenLinksOnly?: boolean }) {
    this.deps = deps;
  }

  async create(tenantId: string, body: GithubIntegrationCreate): Promise<GithubIntegration> {
    if (this.deps.provenLinksOnly) {
      // A bare id proves nothing: whoever typed it would see the installation's deliveries and repositories.
      throw new BadRequest(
        'This server links GitHub installations only when their owner proves them: POST /v1/integrations/github/install-url and open the url it answers.',
      );
    }
    const integration = { id: crypto.randomUUID(), installation_id: body.installation_id, name: body.name };
    auditSubject(integration.id);
    await this.deps.store.createIntegration({ ...integration, tenant_id: tenantId, suspended: false, created_at: this.deps.clock.now() });
    return integration;
  }

  async list(tenantId: string): Promise<GithubIntegration[]> {
    const rows = await this.deps.store.listIntegrations(tenantId);
    return rows.map(({ id, installation_id, name }) => ({ id, installation_id, name }));
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.deps.store.deleteIntegration(tenantId, id))) throw new NotFound(`GitHub integration ID ${id} not found.`);
  }
}
