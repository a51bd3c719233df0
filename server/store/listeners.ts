import type { ComputeConfig, ComputeType, Listener } from '../../shared/schemas/listener.ts';
import { hotQueries } from './queries/hot-paths.ts';
import { toListener } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { ListenerRecord, Page } from './types.ts';

/** Where a workspace's deployments run: its listeners (the built-in sandbox, and the agents' computes). */
export interface ListenerStore {
  createListener(input: Listener): Promise<void>;
  getListener(tenantId: string, id: string): Promise<ListenerRecord | null>;
  getListenerById(id: string): Promise<ListenerRecord | null>;
  /**
   * The compute type of the listener that serves a deployment of the workspace: `listenerId`, or the
   * workspace's default when null; null when there is none (the built-in sandbox serves). One read,
   * on every create, not a read of the workspace and then one of the listener.
   */
  servingComputeType(tenantId: string, listenerId: string | null): Promise<ComputeType | null>;
  listListeners(tenantId: string, limit: number, offset: number): Promise<Page<ListenerRecord>>;
  updateListener(tenantId: string, id: string, computeConfig: ComputeConfig, now: string, version?: string | null): Promise<ListenerRecord | null>;
  /** False when deployments still use the listener. */
  deleteListener(tenantId: string, id: string): Promise<'deleted' | 'not_found' | 'in_use'>;
}

export class SqlListenerStore extends SqlStore implements ListenerStore {
  readonly #hot = hotQueries(this.sql.dialect);

  async createListener(input: Listener): Promise<void> {
    await this.refusingDuplicate({ kind: 'listener_compute_id_taken', computeId: input.compute_id }, async () => {
      await this.sql.run(
        `INSERT INTO listeners (id, tenant_id, version, compute_type, compute_id, compute_config, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          input.id,
          input.tenant_id,
          input.version ?? null,
          input.compute_type,
          input.compute_id,
          JSON.stringify(input.compute_config),
          input.created_at,
          input.updated_at,
        ],
      );
    });
  }

  async getListener(tenantId: string, id: string): Promise<ListenerRecord | null> {
    return this.first(toListener, 'SELECT * FROM listeners WHERE id = ? AND tenant_id = ?', [id, tenantId]);
  }

  async servingComputeType(tenantId: string, listenerId: string | null): Promise<ComputeType | null> {
    const row = await this.sql.row<{ compute_type: ComputeType }>(this.#hot.servingComputeType, [tenantId, listenerId, tenantId]);
    return row?.compute_type ?? null;
  }

  async getListenerById(id: string): Promise<ListenerRecord | null> {
    return this.first(toListener, 'SELECT * FROM listeners WHERE id = ?', [id]);
  }

  async listListeners(tenantId: string, limit: number, offset: number): Promise<Page<ListenerRecord>> {
    const rows = await this.sql.rows('SELECT * FROM listeners WHERE tenant_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?', [
      tenantId,
      limit,
      offset,
    ]);
    return { resources: rows.map(toListener), offset: offset + rows.length };
  }

  async updateListener(tenantId: string, id: string, computeConfig: ComputeConfig, now: string, version?: string | null): Promise<ListenerRecord | null> {
    const changed = await this.sql.run(
      'UPDATE listeners SET compute_config = ?, version = coalesce(?, version), updated_at = ? WHERE id = ? AND tenant_id = ?',
      [JSON.stringify(computeConfig), version ?? null, now, id, tenantId],
    );
    return changed === 1 ? this.getListener(tenantId, id) : null;
  }

  async deleteListener(tenantId: string, id: string): Promise<'deleted' | 'not_found' | 'in_use'> {
    return this.sql.tx(async (tx) => {
      if (!(await tx.row(`SELECT 1 FROM listeners WHERE id = ? AND tenant_id = ?${tx.dialect.forUpdate}`, [id, tenantId]))) return 'not_found';
      if (await tx.row('SELECT 1 FROM deployments WHERE listener_id = ? LIMIT 1', [id])) return 'in_use';
      await tx.run('DELETE FROM listeners WHERE id = ?', [id]);
      return 'deleted';
    });
  }
}
