import { toUpload, type ClaimOutcome, type UploadRecord, type UploadStore } from '../uploads.ts';
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

  async claimUpload(id: string): Promise<ClaimOutcome> {
    const db = this.#db;
    return db.tx(async (c): Promise<ClaimOutcome> => {
      // Locked: of two PUTs racing for one URL, one claims it and the other sees it in use.
      const row = await db.row<{ state: string }>('SELECT state FROM uploads WHERE id = ? FOR UPDATE', [id], c);
      if (!row) return 'not_found';
      if (row.state === 'complete') return 'used';
      if (row.state === 'receiving') return 'in_use';
      await db.run("UPDATE uploads SET state = 'receiving' WHERE id = ? AND state = 'issued'", [id], c);
      return 'claimed';
    });
  }

  async writeChunk(id: string, seq: number, data: Buffer): Promise<void> {
    await this.#db.run('INSERT INTO upload_chunks (upload_id, seq, data) VALUES (?, ?, ?)', [id, seq, data]);
  }

  async completeUpload(id: string, size: number, now: string): Promise<void> {
    await this.#db.run("UPDATE uploads SET state = 'complete', size = ?, completed_at = ? WHERE id = ? AND state = 'receiving'", [size, now, id]);
  }

  async releaseUpload(id: string): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      await db.run('DELETE FROM upload_chunks WHERE upload_id = ?', [id], c);
      await db.run("UPDATE uploads SET state = 'issued' WHERE id = ? AND state = 'receiving'", [id], c);
    });
  }

  async releaseInterruptedUploads(): Promise<number> {
    const db = this.#db;
    return db.tx(async (c) => {
      await db.run("DELETE FROM upload_chunks WHERE upload_id IN (SELECT id FROM uploads WHERE state = 'receiving')", [], c);
      return db.run("UPDATE uploads SET state = 'issued' WHERE state = 'receiving'", [], c);
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
