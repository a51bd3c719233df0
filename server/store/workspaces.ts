import type { Workspace } from '../../shared/schemas/workspace.ts';
import { hotQueries } from './queries/hot-paths.ts';
import { toWorkspace } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { BootstrapResult } from './types.ts';

/** Every workspace's built-in sandbox listener, made with the workspace. */
const SANDBOX_LISTENER = `INSERT INTO listeners (id, tenant_id, compute_type, compute_id, compute_config, created_at, updated_at)
  VALUES (?, ?, 'sandbox', 'sandbox', '{"k8s_namespaces":[]}', ?, ?)`;

/** The organization, its workspaces (tenants) and the first start's bootstrap. */
export interface WorkspaceStore {
  /** The default organization and workspace, made once whoever starts first; with `keyHash`, the bootstrap key (revived when revoked). */
  bootstrap(input: { keyHash: string | null; keyId: string; now: string }): Promise<BootstrapResult>;
  getWorkspace(id: string): Promise<(Workspace & { is_default: boolean }) | null>;
  getDefaultWorkspace(organizationId: string): Promise<Workspace | null>;
  createWorkspace(input: Workspace): Promise<void>;
  listWorkspaces(organizationId: string): Promise<Workspace[]>;
}

export class SqlWorkspaceStore extends SqlStore implements WorkspaceStore {
  readonly #hot = hotQueries(this.sql.dialect);

  async bootstrap(input: { keyHash: string | null; keyId: string; now: string }): Promise<BootstrapResult> {
    return this.sql.tx(async (tx) => {
      // Two processes bootstrapping together create one organization and one workspace.
      await tx.dialect.serialize(tx, 'bootstrap');
      const wasEmpty = (await tx.row<{ n: number }>('SELECT count(*) AS n FROM api_keys'))!.n === 0;
      let org = await tx.row<{ id: string }>("SELECT id FROM organizations WHERE name = 'default'");
      if (!org) {
        org = { id: crypto.randomUUID() };
        await tx.run("INSERT INTO organizations (id, name, created_at) VALUES (?, 'default', ?)", [org.id, input.now]);
      }
      let ws = await tx.row<{ id: string }>('SELECT id FROM workspaces WHERE organization_id = ? AND is_default = 1', [org.id]);
      if (!ws) {
        ws = { id: crypto.randomUUID() };
        await tx.run("INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, 'default', 1, ?)", [ws.id, org.id, input.now]);
        await tx.run(SANDBOX_LISTENER, [crypto.randomUUID(), ws.id, input.now, input.now]);
      }
      if (input.keyHash) {
        await tx.run(
          `INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at)
           VALUES (?, ?, NULL, ?, 'bootstrap key', ?)
           ON CONFLICT (key_hash) DO UPDATE SET revoked_at = NULL WHERE api_keys.revoked_at IS NOT NULL`,
          [input.keyId, org.id, input.keyHash, input.now],
        );
      }
      return { organizationId: org.id, workspaceId: ws.id, wasEmpty };
    });
  }

  async getWorkspace(id: string): Promise<(Workspace & { is_default: boolean }) | null> {
    const row = await this.sql.row('SELECT * FROM workspaces WHERE id = ?', [id]);
    return row ? { ...toWorkspace(row), is_default: row.is_default === 1 } : null;
  }

  async getDefaultWorkspace(organizationId: string): Promise<Workspace | null> {
    // Inline, not through `first`: this is a hot path's read.
    const row = await this.sql.row(this.#hot.defaultWorkspace, [organizationId]);
    return row ? toWorkspace(row) : null;
  }

  async createWorkspace(input: Workspace): Promise<void> {
    await this.refusingDuplicate({ kind: 'workspace_name_taken', name: input.name }, async () => {
      await this.sql.tx(async (tx) => {
        await tx.run('INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, ?, 0, ?)', [
          input.id,
          input.organization_id,
          input.name,
          input.created_at,
        ]);
        // Every workspace can deploy to the sandbox from its first minute, as the default one can.
        await tx.run(SANDBOX_LISTENER, [crypto.randomUUID(), input.id, input.created_at, input.created_at]);
      });
    });
  }

  async listWorkspaces(organizationId: string): Promise<Workspace[]> {
    const rows = await this.sql.rows('SELECT * FROM workspaces WHERE organization_id = ? ORDER BY created_at, rowid', [organizationId]);
    return rows.map(toWorkspace);
  }
}
