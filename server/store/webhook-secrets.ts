import type Database from 'better-sqlite3';

/** A workspace's repository-webhook secrets as stored: encrypted, never in clear. */
export type StoredWebhookSecret = {
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_valid_until: string | null;
  created_at: string;
};

/** Storage of each workspace's repository-webhook secret (values arrive and leave encrypted). */
export interface WebhookSecretStore {
  get(tenantId: string): Promise<StoredWebhookSecret | null>;
  /**
   * Makes `secretEnc` the workspace's secret. The one it replaces (if any) stays accepted until
   * `previousValidUntil`; one rotated out before it is dropped. One transaction.
   */
  rotate(tenantId: string, secretEnc: string, previousValidUntil: string, now: string): Promise<StoredWebhookSecret>;
  /** False when the workspace had no secret. */
  remove(tenantId: string): Promise<boolean>;
}

export class SqliteWebhookSecretStore implements WebhookSecretStore {
  readonly #db: Database.Database;

  constructor(db: Database.Database) {
    this.#db = db;
  }

  async get(tenantId: string): Promise<StoredWebhookSecret | null> {
    const row = this.#db
      .prepare('SELECT secret_enc, previous_secret_enc, previous_valid_until, created_at FROM webhook_workspace_secrets WHERE tenant_id = ?')
      .get(tenantId) as StoredWebhookSecret | undefined;
    return row ?? null;
  }

  async rotate(tenantId: string, secretEnc: string, previousValidUntil: string, now: string): Promise<StoredWebhookSecret> {
    const db = this.#db;
    return db.transaction((): StoredWebhookSecret => {
      const current = db.prepare('SELECT secret_enc FROM webhook_workspace_secrets WHERE tenant_id = ?').get(tenantId) as { secret_enc: string } | undefined;
      const next: StoredWebhookSecret = {
        secret_enc: secretEnc,
        previous_secret_enc: current?.secret_enc ?? null,
        previous_valid_until: current ? previousValidUntil : null,
        created_at: now,
      };
      db.prepare(
        `INSERT INTO webhook_workspace_secrets (tenant_id, secret_enc, previous_secret_enc, previous_valid_until, created_at)
         VALUES (@tenant_id, @secret_enc, @previous_secret_enc, @previous_valid_until, @created_at)
         ON CONFLICT (tenant_id) DO UPDATE SET secret_enc = excluded.secret_enc, previous_secret_enc = excluded.previous_secret_enc,
           previous_valid_until = excluded.previous_valid_until, created_at = excluded.created_at`,
      ).run({ tenant_id: tenantId, ...next });
      return next;
    })();
  }

  async remove(tenantId: string): Promise<boolean> {
    return this.#db.prepare('DELETE FROM webhook_workspace_secrets WHERE tenant_id = ?').run(tenantId).changes > 0;
  }
}
