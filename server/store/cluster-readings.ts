import type { ClusterReadings } from '../metrics.ts';
import type { Db } from './db.ts';
import { SqlStore } from './sql-store.ts';

/**
 * The shared state the cluster-wide gauges report, read from the database at each scrape: every
 * process answers the same, whichever one Prometheus asks.
 */
export class SqlClusterReadings extends SqlStore implements ClusterReadings {
  constructor(db: Db) {
    super(db);
  }

  async githubOutboxPending(): Promise<number> {
    return Number((await this.sql.row<{ n: number }>('SELECT count(*) AS n FROM github_outbox WHERE done_at IS NULL'))?.n ?? 0);
  }

  agentHeartbeats(): Promise<Array<{ listener_id: string; last_seen_at: string }>> {
    return this.sql.rows(
      "SELECT id AS listener_id, last_seen_at FROM listeners WHERE last_seen_at IS NOT NULL AND compute_type IN ('local', 'k8s') ORDER BY id",
    );
  }

  async workPending(): Promise<Array<{ compute_type: string; pending: number }>> {
    // A deployment's listener, else its workspace's default; the built-in sandbox when neither.
    const rows = await this.sql.rows<{ compute_type: string; pending: number }>(
      `SELECT COALESCE(l.compute_type, 'sandbox') AS compute_type, count(*) AS pending
         FROM revisions r
         JOIN deployments d ON d.id = r.deployment_id
         JOIN workspaces w ON w.id = d.tenant_id
         LEFT JOIN listeners l ON l.id = COALESCE(d.listener_id, w.default_listener_id)
        WHERE r.status IN ('QUEUED', 'AWAITING_BUILD', 'AWAITING_DEPLOY')
        GROUP BY COALESCE(l.compute_type, 'sandbox')`,
    );
    return rows.map((row) => ({ compute_type: row.compute_type, pending: Number(row.pending) }));
  }
}
