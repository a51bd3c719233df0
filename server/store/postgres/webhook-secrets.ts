import type { StoredWebhookSecret, WebhookSecretStore } from '../webhook-secrets.ts';
import type { PgDb } from './db.ts';

/** Each workspace's repository-webhook secret on PostgreSQL (mirrors `../webhook-secrets.ts`). */
export class PgWebhookSecretStore implements WebhookSecretStore {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async get(tenantId: string): Promise<StoredWebhookSecret | null> {
    return (
      (await this.#db.row<StoredWebhookSecret>('SELECT secret_enc, previous_secret_enc, previous_valid_until, created_at FROM webhook_workspace_secrets WHERE tenant_id = ?', [tenantId])) ??
      null
    );
  }

  async rotate(tenantId: string, secretEnc: string, previousValidUntil: string, now: string): Promise<StoredWebhookSecret> {
    const db = this.#db;
    return db.tx(async (c) => {
      // Locks the workspace's row, so two rotations in a row keep the first's secret as the previous one.
      await c.query("SELECT pg_advisory_xact_lock(hashtextextended('control-plane:webhook-secret:' || $1::text, 0))", [tenantId]);
      const current = await db.row<{ secret_enc: string }>('SELECT secret_enc FROM webhook_workspace_secrets WHERE tenant_id = ?', [tenantId], c);
      const next: StoredWebhookSecret = {
        secret_enc: secretEnc,
        previous_secret_enc: current?.secret_enc ?? null,
        previous_valid_until: current ? previousValidUntil : null,
        created_at: now,
      };
      await db.run(
        `INSERT INTO webhook_workspace_secrets (tenant_id, secret_enc, previous_secret_enc, previous_valid_until, created_at)
         VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (tenant_id) DO UPDATE SET secret_enc = excluded.secret_enc, previous_secret_enc = excluded.previous_secret_enc,
           previous_valid_until = excluded.previous_valid_until, created_at = excluded.created_at`,
        [tenantId, next.secret_enc, next.previous_secret_enc, next.previous_valid_until, next.created_at],
        c,
      );
      return next;
    });
  }

  async remove(tenantId: string): Promise<boolean> {
    return (await this.#db.run('DELETE FROM webhook_workspace_secrets WHERE tenant_id = ?', [tenantId])) > 0;
  }
}
