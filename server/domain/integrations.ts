import type { GithubIntegration, GithubIntegrationCreate } from '../../shared/schemas/integration.ts';
import type { Store } from '../store/types.ts';
import type { Clock } from './clock.ts';
import { NotFound } from './errors.ts';

/** GitHub App installations linked to a workspace. */
export class Integrations {
  private readonly deps: { store: Store; clock: Clock };

  constructor(deps: { store: Store; clock: Clock }) {
    this.deps = deps;
  }

  async create(tenantId: string, body: GithubIntegrationCreate): Promise<GithubIntegration> {
    const integration = { id: crypto.randomUUID(), installation_id: body.installation_id, name: body.name };
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
