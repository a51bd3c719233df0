import type Database from 'better-sqlite3';
import { LEASE_QUERIES } from './hot-queries.ts';
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
  writeChunk(id: string, seq: number, data: Buffer): Promise<void>;
  /** `receiving` → `complete`, with the size; false when `owner` no longer holds it (its lease passed and it was released). */
  completeUpload(id: string, size: number, now: string, owner: string): Promise<boolean>;
  /** A failed PUT of `owner`: its chunks are removed and the URL may be used again until it expires. */
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
  /** Bytes of the workspace's complete tarballs (what its quota counts). */
  workspaceUploadBytes(tenantId: string): Promise<number>;
  /** URLs of the deployment issued and not yet used up (nor expired). */
  openUploadCount(deploymentId: string, now: string): Promise<number>;
}

type Row = Record<string, unknown>;

export class SqliteUploadStore implements UploadStore {
  readonly #db: Database.Database;

  constructor(db: Database.Database) {
    this.#db = db;
  }

  async createUpload(input: Omit<UploadRecord, 'state' | 'size'> & { created_at: string }): Promise<void> {
    this.#db
      .prepare(
        `INSERT INTO uploads (id, deployment_id, tenant_id, object_path, state, expires_at, created_at)
         VALUES (@id, @deployment_id, @tenant_id, @object_path, 'issued', @expires_at, @created_at)`,
      )
      .run(input);
  }

  async getUpload(id: string): Promise<UploadRecord | null> {
    const row = this.#db.prepare('SELECT * FROM uploads WHERE id = ?').get(id) as Row | undefined;
    return row ? toUpload(row) : null;
  }

  async claimUpload(id: string, lease: WorkLease): Promise<ClaimOutcome> {
    return this.#db.transaction((): ClaimOutcome => {
      const row = this.#db.prepare('SELECT state FROM uploads WHERE id = ?').get(id) as { state: string } | undefined;
      if (!row) return 'not_found';
      if (row.state === 'complete') return 'used';
      if (row.state === 'receiving') return 'in_use';
      this.#db.prepare("UPDATE uploads SET state = 'receiving', receiver_id = ?, receive_lease_expires_at = ? WHERE id = ? AND state = 'issued'").run(lease.owner, lease.until, id);
      return 'claimed';
    })();
  }

  async renewUploadLeases(lease: WorkLease): Promise<number> {
    return this.#db.prepare(LEASE_QUERIES.renewUploadLeases).run({ until: lease.until, owner: lease.owner }).changes;
  }

  async writeChunk(id: string, seq: number, data: Buffer): Promise<void> {
    this.#db.prepare('INSERT INTO upload_chunks (upload_id, seq, data) VALUES (?, ?, ?)').run(id, seq, data);
  }

  async completeUpload(id: string, size: number, now: string, owner: string): Promise<boolean> {
    return this.#db.prepare("UPDATE uploads SET state = 'complete', size = ?, completed_at = ? WHERE id = ? AND state = 'receiving' AND receiver_id = ?").run(size, now, id, owner).changes === 1;
  }

  async releaseUpload(id: string, owner: string): Promise<void> {
    this.#db.transaction(() => {
      if (this.#db.prepare("UPDATE uploads SET state = 'issued', receiver_id = NULL, receive_lease_expires_at = NULL WHERE id = ? AND state = 'receiving' AND receiver_id = ?").run(id, owner).changes === 1) {
        this.#db.prepare('DELETE FROM upload_chunks WHERE upload_id = ?').run(id);
      }
    })();
  }

  async releaseInterruptedUploads(now: string): Promise<number> {
    return this.#db.transaction(() => {
      const gone = "SELECT id FROM uploads WHERE state = 'receiving' AND (receive_lease_expires_at IS NULL OR receive_lease_expires_at < ?)";
      this.#db.prepare(`DELETE FROM upload_chunks WHERE upload_id IN (${gone})`).run(now);
      return this.#db.prepare(`UPDATE uploads SET state = 'issued', receiver_id = NULL, receive_lease_expires_at = NULL WHERE id IN (${gone})`).run(now).changes;
    })();
  }

  async findCompleteUpload(deploymentId: string, objectPath: string): Promise<UploadRecord | null> {
    const row = this.#db.prepare("SELECT * FROM uploads WHERE deployment_id = ? AND object_path = ? AND state = 'complete'").get(deploymentId, objectPath) as Row | undefined;
    return row ? toUpload(row) : null;
  }

  async readChunk(id: string, seq: number): Promise<Buffer | null> {
    const row = this.#db.prepare('SELECT data FROM upload_chunks WHERE upload_id = ? AND seq = ?').get(id, seq) as { data: Buffer } | undefined;
    return row?.data ?? null;
  }

  /**
   * Drops expired URLs never used, and complete tarballs no revision names that are older than
   * `unusedBefore` (time enough for the PATCH that names one): of one deployment, or of all.
   */
  async removeStaleUploads(deploymentId: string | null, now: string, unusedBefore: string): Promise<number> {
    return this.#db.transaction(() => {
      const scope = deploymentId === null ? '' : 'AND deployment_id = @deployment_id';
      let removed = this.#db.prepare(`DELETE FROM uploads WHERE state = 'issued' AND expires_at < @now ${scope}`).run({ now, deployment_id: deploymentId }).changes;
      // Chunk rows go with their upload (ON DELETE CASCADE).
      removed += this.#db
        .prepare(
          `DELETE FROM uploads WHERE state = 'complete' AND completed_at < @unused_before ${scope}
             AND NOT EXISTS (
               SELECT 1 FROM revisions r WHERE r.deployment_id = uploads.deployment_id
                 AND json_extract(r.source_revision_config, '$.source_tarball_path') = uploads.object_path)`,
        )
        .run({ deployment_id: deploymentId, unused_before: unusedBefore }).changes;
      return removed;
    })();
  }

  /** Bytes of the workspace's complete tarballs (what its quota counts). */
  async workspaceUploadBytes(tenantId: string): Promise<number> {
    return (this.#db.prepare("SELECT coalesce(sum(size), 0) AS n FROM uploads WHERE tenant_id = ? AND state = 'complete'").get(tenantId) as { n: number }).n;
  }

  /** URLs of the deployment issued and not yet used up (nor expired). */
  async openUploadCount(deploymentId: string, now: string): Promise<number> {
    return (this.#db.prepare("SELECT count(*) AS n FROM uploads WHERE deployment_id = ? AND state IN ('issued', 'receiving') AND expires_at >= ?").get(deploymentId, now) as { n: number }).n;
  }
}

export function toUpload(row: Row): UploadRecord {
  return {
    id: row.id as string,
    deployment_id: row.deployment_id as string,
    tenant_id: row.tenant_id as string,
    object_path: row.object_path as string,
    state: row.state as UploadRecord['state'],
    size: (row.size as number | null) ?? null,
    expires_at: row.expires_at as string,
  };
}
