import type { SecretBox } from '../crypto/secret-box.ts';
import type { Db } from './db.ts';
import { leaseQueries } from './queries/leases.ts';
import { toDeployment } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { DeploymentRecord, WorkLease } from './types.ts';

/** Deployments being deleted: who tears each down (a lease per deployment), and their removal once done. */
export interface TeardownStore {
  listDeletingDeployments(): Promise<DeploymentRecord[]>;
  /**
   * Makes `lease.owner` the one process tearing the deployment down: true when it is being deleted
   * and nobody else holds a live teardown lease on it (held by the caller already counts).
   */
  claimTeardown(deploymentId: string, lease: WorkLease): Promise<boolean>;
  /** Claims up to `limit` deployments being deleted whose teardown nobody holds (or whose lease has passed). */
  takeOverTeardowns(lease: WorkLease, limit: number): Promise<DeploymentRecord[]>;
  /** Renews the teardown leases `lease.owner` holds of these deployments; answers the ids renewed. */
  renewTeardownLeases(deploymentIds: readonly string[], lease: WorkLease): Promise<string[]>;
  /** Removes the deployment, its revisions and logs, and its tracing project when asked to. */
  removeDeployment(id: string): Promise<void>;
}

export class SqlTeardownStore extends SqlStore implements TeardownStore {
  readonly #box: SecretBox;
  readonly #lease = leaseQueries(this.sql.dialect);

  constructor(db: Db, box: SecretBox) {
    super(db);
    this.#box = box;
  }

  async listDeletingDeployments(): Promise<DeploymentRecord[]> {
    const rows = await this.sql.rows("SELECT * FROM deployments WHERE status = 'AWAITING_DELETE'");
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async claimTeardown(deploymentId: string, lease: WorkLease): Promise<boolean> {
    // One conditional UPDATE: the row lock it takes makes two claimants queue, and the second sees the first's owner.
    const claimed = await this.sql.run(
      `UPDATE deployments SET teardown_owner = @owner, teardown_lease_expires_at = @until
       WHERE id = @id AND status = 'AWAITING_DELETE' AND (teardown_owner IS NULL OR teardown_owner = @owner OR teardown_lease_expires_at < @now)`,
      { id: deploymentId, owner: lease.owner, until: lease.until, now: lease.now },
    );
    return claimed === 1;
  }

  async takeOverTeardowns(lease: WorkLease, limit: number): Promise<DeploymentRecord[]> {
    const rows = await this.sql.rows(this.#lease.takeOverTeardowns, { owner: lease.owner, until: lease.until, now: lease.now, limit });
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async renewTeardownLeases(deploymentIds: readonly string[], lease: WorkLease): Promise<string[]> {
    if (deploymentIds.length === 0) return [];
    const rows = await this.sql.rows<{ id: string }>(this.#lease.renewTeardownLeases, {
      owner: lease.owner,
      until: lease.until,
      ids: this.sql.dialect.list(deploymentIds),
    });
    return rows.map((row) => row.id);
  }

  async removeDeployment(id: string): Promise<void> {
    await this.sql.tx(async (tx) => {
      const row = await tx.row(`SELECT delete_tracing_project FROM deployments WHERE id = ?${tx.dialect.forUpdate}`, [id]);
      if (!row) return;
      if (row.delete_tracing_project === 1) {
        await tx.run('DELETE FROM tracing_projects WHERE deployment_id = ?', [id]);
      } else {
        await tx.run('UPDATE tracing_projects SET deployment_id = NULL WHERE deployment_id = ?', [id]);
      }
      await tx.run('DELETE FROM revision_logs WHERE revision_id IN (SELECT id FROM revisions WHERE deployment_id = ?)', [id]);
      await tx.run('DELETE FROM revisions WHERE deployment_id = ?', [id]);
      await tx.run('DELETE FROM deployments WHERE id = ?', [id]);
    });
  }
}
