import type { Row } from './db.ts';
import { leaseQueries } from './queries/leases.ts';
import { columns } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { WorkLease } from './types.ts';

export type UploadRecord = {
  id: string;
  deployment_id: string;
  tenant_id: string;
  object_path: string;
  state: 'issued' | 'receiving' | 'complete';
  size: number | null;
  expires_at: string;
};

export type ClaimOutcome = 'claimed' | 'not_found' | 'in_use' | 'used';

/**
 * Uploaded source tarballs, kept as ordered chunk rows (≤ 1 MiB each) so that no step holds a
 * whole upload in memory and a later PostgreSQL store can keep them the same way. A row becomes
 * `complete` only after its last chunk is written; readers see only complete uploads.
 */
export interface UploadStore {
  createUpload(input: Omit<UploadRecord, 'state' | 'size'> & { created_at: string }): Promise<void>;
  getUpload(id: string): Promise<UploadRecord | null>;
  /**
   * `issued` → `receiving`, atomically: one PUT at a time, and none after a complete one. The
   * receiving process (`lease.owner`) holds it until `lease.until` unless it renews.
   */
  claimUpload(id: string, lease: WorkLease): Promise<ClaimOutcome>;
  /** Renews the leases of every upload `lease.owner` is receiving; answers how many. One statement. */
  renewUploadLeases(lease: WorkLease): Promise<number>;
  /**
   * Reserves `bytes` more of the workspace's quota for the upload `owner` is receiving: checked
   * and taken under one lock of the workspace (an advisory lock on PostgreSQL, the one writer on
   * SQLite), against its complete tarballs and every reservation of a PUT in progress, so PUTs
   * running at once in any process never store more than `quotaBytes` together. False when it does
   * not fit (nothing reserved) or the upload is no longer `owner`'s.
   */
  reserveUploadBytes(input: { id: string; tenantId: string; owner: string; bytes: number; quotaBytes: number }): Promise<boolean>;
  writeChunk(id: string, seq: number, data: Buffer): Promise<void>;
  /** `receiving` → `complete`, with the size (its reservation settles into it); false when `owner` no longer holds it (its lease passed and it was released). */
  completeUpload(id: string, size: number, now: string, owner: string): Promise<boolean>;
  /** A failed PUT of `owner`: its chunks and its reservation are removed and the URL may be used again until it expires. */
  releaseUpload(id: string, owner: string): Promise<void>;
  /**
   * PUTs cut off by a crash leave chunks of an upload still `receiving`: drops those whose
   * receiving process's lease has passed (that process is gone), never another live one's.
   */
  releaseInterruptedUploads(now: string): Promise<number>;
  findCompleteUpload(deploymentId: string, objectPath: string): Promise<UploadRecord | null>;
  /** The chunk with this sequence number, or null past the end. */
  readChunk(id: string, seq: number): Promise<Buffer | null>;
  /** Expired URLs never used, and complete tarballs no revision names older than `unusedBefore`: of one deployment, or of all (null). */
  removeStaleUploads(deploymentId: string | null, now: string, unusedBefore: string): Promise<number>;
  /** Bytes of the workspace's complete tarballs and of the reservations of its PUTs in progress (what its quota counts). */
  workspaceUploadBytes(tenantId: string): Promise<number>;
  /** URLs of the deployment issued and not yet used up (nor expired). */
  openUploadCount(deploymentId: string, now: string): Promise<number>;
}

/** What a workspace's quota counts: its complete tarballs, and what its PUTs in progress reserved. */
const USED_BYTES =
  "SELECT coalesce(sum(CASE WHEN state = 'complete' THEN size ELSE reserved_bytes END), 0) AS n FROM uploads WHERE tenant_id = ? AND state IN ('complete', 'receiving')";

/** Uploaded source tarballs in chunk rows (a BLOB on SQLite, `bytea` on PostgreSQL), on either database. */
export class SqlUploadStore extends SqlStore implements UploadStore {
  async createUpload(input: Omit<UploadRecord, 'state' | 'size'> & { created_at: string }): Promise<void> {
    await this.sql.run(
      `INSERT INTO uploads (id, deployment_id, tenant_id, object_path, state, expires_at, created_at)
       VALUES (?, ?, ?, ?, 'issued', ?, ?)`,
      [input.id, input.deployment_id, input.tenant_id, input.object_path, input.expires_at, input.created_at],
    );
  }

  async getUpload(id: string): Promise<UploadRecord | null> {
    return this.first(toUpload, 'SELECT * FROM uploads WHERE id = ?', [id]);
  }

  async claimUpload(id: string, lease: WorkLease): Promise<ClaimOutcome> {
    return this.sql.tx(async (tx): Promise<ClaimOutcome> => {
      // Locked: of two PUTs racing for one URL, one claims it and the other sees it in use.
      const row = await tx.row<{ state: string }>(`SELECT state FROM uploads WHERE id = ?${tx.dialect.forUpdate}`, [id]);
      if (!row) return 'not_found';
      if (row.state === 'complete') return 'used';
      if (row.state === 'receiving') return 'in_use';
      await tx.run("UPDATE uploads SET state = 'receiving', receiver_id = ?, receive_lease_expires_at = ? WHERE id = ? AND state = 'issued'", [
        lease.owner,
        lease.until,
        id,
      ]);
      return 'claimed';
    });
  }

  async renewUploadLeases(lease: WorkLease): Promise<number> {
    return this.sql.run(leaseQueries(this.sql.dialect).renewUploadLeases, { until: lease.until, owner: lease.owner });
  }

  async reserveUploadBytes(input: { id: string; tenantId: string; owner: string; bytes: number; quotaBytes: number }): Promise<boolean> {
    return this.sql.tx(async (tx) => {
      await tx.dialect.serialize(tx, `upload-quota:${input.tenantId}`);
      const used = Number((await tx.row<{ n: string | number }>(USED_BYTES, [input.tenantId]))?.n ?? 0);
      if (used + input.bytes > input.quotaBytes) return false;
      return (
        (await tx.run("UPDATE uploads SET reserved_bytes = reserved_bytes + ? WHERE id = ? AND tenant_id = ? AND state = 'receiving' AND receiver_id = ?", [
          input.bytes,
          input.id,
          input.tenantId,
          input.owner,
        ])) === 1
      );
    });
  }

  async writeChunk(id: string, seq: number, data: Buffer): Promise<void> {
    await this.sql.run('INSERT INTO upload_chunks (upload_id, seq, data) VALUES (?, ?, ?)', [id, seq, data]);
  }

  async completeUpload(id: string, size: number, now: string, owner: string): Promise<boolean> {
    return (
      (await this.sql.run(
        "UPDATE uploads SET state = 'complete', size = ?, reserved_bytes = 0, completed_at = ? WHERE id = ? AND state = 'receiving' AND receiver_id = ?",
        [size, now, id, owner],
      )) === 1
    );
  }

  async releaseUpload(id: string, owner: string): Promise<void> {
    await this.sql.tx(async (tx) => {
      const released = await tx.run(
        "UPDATE uploads SET state = 'issued', receiver_id = NULL, receive_lease_expires_at = NULL, reserved_bytes = 0 WHERE id = ? AND state = 'receiving' AND receiver_id = ?",
        [id, owner],
      );
      if (released === 1) await tx.run('DELETE FROM upload_chunks WHERE upload_id = ?', [id]);
    });
  }

  async releaseInterruptedUploads(now: string): Promise<number> {
    return this.sql.tx(async (tx) => {
      // Locked and re-checked: an upload whose receiver renewed its lease meanwhile is left alone.
      const gone = await tx.rows<{ id: string }>(
        `SELECT id FROM uploads WHERE state = 'receiving' AND (receive_lease_expires_at IS NULL OR receive_lease_expires_at < ?)${tx.dialect.forUpdateSkipLocked}`,
        [now],
      );
      if (gone.length === 0) return 0;
      const ids = gone.map((row) => row.id);
      await tx.run(`DELETE FROM upload_chunks WHERE ${tx.dialect.inList('upload_id', '?')}`, [tx.dialect.list(ids)]);
      return tx.run(
        `UPDATE uploads SET state = 'issued', receiver_id = NULL, receive_lease_expires_at = NULL, reserved_bytes = 0 WHERE ${tx.dialect.inList('id', '?')}`,
        [tx.dialect.list(ids)],
      );
    });
  }

  async findCompleteUpload(deploymentId: string, objectPath: string): Promise<UploadRecord | null> {
    return this.first(toUpload, "SELECT * FROM uploads WHERE deployment_id = ? AND object_path = ? AND state = 'complete'", [deploymentId, objectPath]);
  }

  async readChunk(id: string, seq: number): Promise<Buffer | null> {
    return (await this.sql.row<{ data: Buffer }>('SELECT data FROM upload_chunks WHERE upload_id = ? AND seq = ?', [id, seq]))?.data ?? null;
  }

  async removeStaleUploads(deploymentId: string | null, now: string, unusedBefore: string): Promise<number> {
    const scope = deploymentId === null ? '' : ' AND u.deployment_id = ?';
    const scoped = deploymentId === null ? [] : [deploymentId];
    return this.sql.tx(async (tx) => {
      let removed = await tx.run(`DELETE FROM uploads AS u WHERE u.state = 'issued' AND u.expires_at < ?${scope}`, [now, ...scoped]);
      // Chunk rows go with their upload (ON DELETE CASCADE).
      removed += await tx.run(
        `DELETE FROM uploads AS u WHERE u.state = 'complete' AND u.completed_at < ?${scope}
           AND NOT EXISTS (
             SELECT 1 FROM revisions r WHERE r.deployment_id = u.deployment_id
               AND ${tx.dialect.jsonText('r.source_revision_config', 'source_tarball_path')} = u.object_path)`,
        [unusedBefore, ...scoped],
      );
      return removed;
    });
  }

  async workspaceUploadBytes(tenantId: string): Promise<number> {
    const row = await this.sql.row<{ n: string | number }>(USED_BYTES, [tenantId]);
    return Number(row?.n ?? 0);
  }

  async openUploadCount(deploymentId: string, now: string): Promise<number> {
    const row = await this.sql.row<{ n: string | number }>(
      "SELECT count(*) AS n FROM uploads WHERE deployment_id = ? AND state IN ('issued', 'receiving') AND expires_at >= ?",
      [deploymentId, now],
    );
    return Number(row?.n ?? 0);
  }
}

export function toUpload(row: Row): UploadRecord {
  return {
    ...columns(row, { id: 'text', deployment_id: 'text', tenant_id: 'text', object_path: 'text' }),
    state: row.state as UploadRecord['state'],
    size: (row.size as number | null) ?? null,
    ...columns(row, { expires_at: 'text' }),
  };
}
