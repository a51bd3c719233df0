import { toUpload, type ClaimOutcome, type UploadRecord, type UploadStore } from '../uploads.ts';
import type { WorkLease } from '../types.ts';
import type { PgDb } from './db.ts';

/** Uploaded source tarballs on PostgreSQL, in `bytea` chunk rows (mirrors `../uploads.ts`). */
export class PgUploadStore implements UploadStore {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async createUpload(input: Omit<UploadRecord, 'state' | 'size'> & { created_at: string }): Promise<void> {
    await this.#db.run(
      `INSERT INTO uploads (id, deployment_id, tenant_id, object_path, state, expires_at, created_at)
       VALUES (?, ?, ?, ?, 'issued', ?, ?)`,
      [input.id, input.deployment_id, input.tenant_id, input.object_path, input.expires_at, input.created_at],
    );
  }

  async getUpload(id: string): Promise<UploadRecord | null> {
    const row = await this.#db.row('SELECT * FROM uploads WHERE id = ?', [id]);
    return row ? toUpload(row) : null;
  }

  async claimUpload(id: string, lease: WorkLease): Promise<ClaimOutcome> {
    const db = this.#db;
    return db.tx(async (c): Promise<ClaimOutcome> => {
      // Locked: of two PUTs racing for one URL, one claims it and the other sees it in use.
      const row = await db.row<{ state: string }>('SELECT state FROM uploads WHERE id = ? FOR UPDATE', [id], c);
      if (!row) return 'not_found';
      if (row.state === 'complete') return 'used';
      if (row.state === 'receiving') return 'in_use';
      await db.run("UPDATE uploads SET state = 'receiving', receiver_id = ?, receive_lease_expires_at = ? WHERE id = ? AND state = 'issued'", [lease.owner, lease.until, id], c);
      return 'claimed';
    });
  }

  async renewUploadLeases(lease: WorkLease): Promise<number> {
    return this.#db.run("UPDATE uploads SET receive_lease_expires_at = ? WHERE receiver_id = ? AND state = 'receiving'", [lease.until, lease.owner]);
  }

  async writeChunk(id: string, seq: number, data: Buffer): Promise<void> {
    await this.#db.run('INSERT INTO upload_chunks (upload_id, seq, data) VALUES (?, ?, ?)', [id, seq, data]);
  }

  async completeUpload(id: string, size: number, now: string, owner: string): Promise<boolean> {
    return (await this.#db.run("UPDATE uploads SET state = 'complete', size = ?, completed_at = ? WHERE id = ? AND state = 'receiving' AND receiver_id = ?", [size, now, id, owner])) === 1;
  }

  async releaseUpload(id: string, owner: string): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      const released = await db.run("UPDATE uploads SET state = 'issued', receiver_id = NULL, receive_lease_expires_at = NULL WHERE id = ? AND state = 'receiving' AND receiver_id = ?", [id, owner], c);
      if (released === 1) await db.run('DELETE FROM upload_chunks WHERE upload_id = ?', [id], c);
    });
  }

  async releaseInterruptedUploads(now: string): Promise<number> {
    const db = this.#db;
    return db.tx(async (c) => {
      // Locked and re-checked: an upload whose receiver renewed its lease meanwhile is left alone.
      const gone = await db.rows<{ id: string }>(
        "SELECT id FROM uploads WHERE state = 'receiving' AND (receive_lease_expires_at IS NULL OR receive_lease_expires_at < ?) FOR UPDATE SKIP LOCKED",
        [now],
        c,
      );
      if (gone.length === 0) return 0;
      const ids = gone.map((row) => row.id);
      await db.run('DELETE FROM upload_chunks WHERE upload_id = ANY(?::text[])', [ids], c);
      return db.run("UPDATE uploads SET state = 'issued', receiver_id = NULL, receive_lease_expires_at = NULL WHERE id = ANY(?::text[])", [ids], c);
    });
  }

  async findCompleteUpload(deploymentId: string, objectPath: string): Promise<UploadRecord | null> {
    const row = await this.#db.row("SELECT * FROM uploads WHERE deployment_id = ? AND object_path = ? AND state = 'complete'", [deploymentId, objectPath]);
    return row ? toUpload(row) : null;
  }

  async readChunk(id: string, seq: number): Promise<Buffer | null> {
    return (await this.#db.row<{ data: Buffer }>('SELECT data FROM upload_chunks WHERE upload_id = ? AND seq = ?', [id, seq]))?.data ?? null;
  }

  async removeStaleUploads(deploymentId: string | null, now: string, unusedBefore: string): Promise<number> {
    const db = this.#db;
    const scope = deploymentId === null ? '' : ' AND u.deployment_id = ?';
    const scoped = deploymentId === null ? [] : [deploymentId];
    return db.tx(async (c) => {
      let removed = await db.run(`DELETE FROM uploads u WHERE u.state = 'issued' AND u.expires_at < ?${scope}`, [now, ...scoped], c);
      // Chunk rows go with their upload (ON DELETE CASCADE).
      removed += await db.run(
        `DELETE FROM uploads u WHERE u.state = 'complete' AND u.completed_at < ?${scope}
           AND NOT EXISTS (
             SELECT 1 FROM revisions r WHERE r.deployment_id = u.deployment_id
               AND r.source_revision_config::jsonb ->> 'source_tarball_path' = u.object_path)`,
        [unusedBefore, ...scoped],
        c,
      );
      return removed;
    });
  }

  async workspaceUploadBytes(tenantId: string): Promise<number> {
    const row = await this.#db.row<{ n: string | number }>("SELECT coalesce(sum(size), 0) AS n FROM uploads WHERE tenant_id = ? AND state = 'complete'", [tenantId]);
    return Number(row?.n ?? 0);
  }

  async openUploadCount(deploymentId: string, now: string): Promise<number> {
    const row = await this.#db.row<{ n: string | number }>("SELECT count(*) AS n FROM uploads WHERE deployment_id = ? AND state IN ('issued', 'receiving') AND expires_at >= ?", [deploymentId, now]);
    return Number(row?.n ?? 0);
  }
}
