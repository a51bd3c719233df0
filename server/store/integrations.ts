import type { ComputeType } from '../../shared/schemas/listener.ts';
import { auditMachineChange } from './audit.ts';
import { hotQueries } from './queries/hot-paths.ts';
import { toIntegration } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { IntegrationRecord, MachineChange } from './types.ts';

/** Workspaces' links to GitHub App installations, and what GitHub says of an installation. */
export interface IntegrationStore {
  createIntegration(input: IntegrationRecord): Promise<void>;
  getIntegration(tenantId: string, id: string): Promise<IntegrationRecord | null>;
  /**
   * A github create's integration, with the compute type of the listener that is to serve the
   * deployment (the workspace's default; null when it has none), in one read.
   */
  getIntegrationForCreate(tenantId: string, id: string): Promise<{ integration: IntegrationRecord; servingComputeType: ComputeType | null } | null>;
  listIntegrations(tenantId: string): Promise<IntegrationRecord[]>;
  deleteIntegration(tenantId: string, id: string): Promise<boolean>;
  getIntegrationById(id: string): Promise<IntegrationRecord | null>;
  /** `installation` `deleted`: removes every link to the installation; answers the removed ones. */
  removeInstallation(installationId: number, audit?: MachineChange): Promise<IntegrationRecord[]>;
  /** `installation` `suspend` / `unsuspend`: answers the integrations that were marked. */
  setInstallationSuspended(installationId: number, suspendedAt: string | null, audit?: MachineChange): Promise<IntegrationRecord[]>;
}

export class SqlIntegrationStore extends SqlStore implements IntegrationStore {
  readonly #hot = hotQueries(this.sql.dialect);

  async createIntegration(input: IntegrationRecord): Promise<void> {
    await this.refusingDuplicate({ kind: 'installation_linked_here', installationId: input.installation_id }, async () => {
      await this.sql.tx(async (tx) => {
        // An installation belongs to one GitHub account, so to one organization here: the first to
        // link it owns it, and no other organization can claim it (or read its deliveries). Links
        // of one installation are made one at a time.
        await tx.dialect.serialize(tx, `installation:${input.installation_id}`);
        const owner = await tx.row(
          `SELECT w.organization_id FROM github_integrations g JOIN workspaces w ON w.id = g.tenant_id
           WHERE g.installation_id = ? AND w.organization_id <> (SELECT organization_id FROM workspaces WHERE id = ?) LIMIT 1`,
          [input.installation_id, input.tenant_id],
        );
        if (owner) throw this.rules.refusal({ kind: 'installation_linked_elsewhere', installationId: input.installation_id });
        await tx.run('INSERT INTO github_integrations (id, tenant_id, installation_id, name, suspended_at, created_at) VALUES (?, ?, ?, ?, NULL, ?)', [
          input.id,
          input.tenant_id,
          input.installation_id,
          input.name,
          input.created_at,
        ]);
      });
    });
  }

  async getIntegration(tenantId: string, id: string): Promise<IntegrationRecord | null> {
    return this.first(toIntegration, 'SELECT * FROM github_integrations WHERE id = ? AND tenant_id = ?', [id, tenantId]);
  }

  async getIntegrationForCreate(tenantId: string, id: string): Promise<{ integration: IntegrationRecord; servingComputeType: ComputeType | null } | null> {
    const row = await this.sql.row(this.#hot.integrationForCreate, [id, tenantId]);
    return row ? { integration: toIntegration(row), servingComputeType: (row.serving_compute_type as ComputeType | null) ?? null } : null;
  }

  async listIntegrations(tenantId: string): Promise<IntegrationRecord[]> {
    return (await this.sql.rows('SELECT * FROM github_integrations WHERE tenant_id = ? ORDER BY created_at, rowid', [tenantId])).map(toIntegration);
  }

  async deleteIntegration(tenantId: string, id: string): Promise<boolean> {
    return (await this.sql.run('DELETE FROM github_integrations WHERE id = ? AND tenant_id = ?', [id, tenantId])) === 1;
  }

  async getIntegrationById(id: string): Promise<IntegrationRecord | null> {
    // Inline, not through `first`: this is a hot path's read.
    const row = await this.sql.row(this.#hot.integrationById, [id]);
    return row ? toIntegration(row) : null;
  }

  async removeInstallation(installationId: number, audit?: MachineChange): Promise<IntegrationRecord[]> {
    return this.sql.tx(async (tx) => {
      const rows = await tx.rows(`SELECT * FROM github_integrations WHERE installation_id = ? ORDER BY rowid${tx.dialect.forUpdate}`, [installationId]);
      await tx.run('DELETE FROM github_integrations WHERE installation_id = ?', [installationId]);
      const removed = rows.map(toIntegration);
      if (audit)
        for (const integration of removed)
          await auditMachineChange(tx, integration.tenant_id, audit, { action: 'delete', resourceType: 'integration', resourceId: integration.id });
      return removed;
    });
  }

  async setInstallationSuspended(installationId: number, suspendedAt: string | null, audit?: MachineChange): Promise<IntegrationRecord[]> {
    return this.sql.tx(async (tx) => {
      await tx.run('UPDATE github_integrations SET suspended_at = ? WHERE installation_id = ?', [suspendedAt, installationId]);
      const marked = (await tx.rows('SELECT * FROM github_integrations WHERE installation_id = ? ORDER BY rowid', [installationId])).map(toIntegration);
      const action = suspendedAt === null ? 'unsuspend' : 'suspend';
      if (audit)
        for (const integration of marked)
          await auditMachineChange(tx, integration.tenant_id, audit, { action, resourceType: 'integration', resourceId: integration.id });
      return marked;
    });
  }
}
