import { SqlStore } from './sql-store.ts';

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

/** Each workspace's repository-webhook secret, on either database. */
export class SqlWebhookSecretStore extends SqlStore implements WebhookSecretStore {
  async get(tenantId: string): Promise<StoredWebhookSecret | null> {
    return (
      (await this.sql.row<StoredWebhookSecret>(
        'SELECT secret_enc, previous_secret_enc, previous_valid_until, created_at FROM webhook_workspace_secrets WHERE tenant_id = ?',
        [tenantId],
      )) ?? null
    );
  }

  async rotate(tenantId: string, secretEnc: string, previousValidUntil: string, now: string): Promise<StoredWebhookSecret> {
    return this.sql.tx(async (tx) => {
      // One rotation of a workspace at a time, so two in a row keep the first's secret as the previous one.
      await tx.dialect.serialize(tx, `webhook-secret:${tenantId}`);
      const current = await tx.row<{ secret_enc: string }>('SELECT secret_enc FROM webhook_workspace_secrets WHERE tenant_id = ?', [tenantId]);
      const next: StoredWebhookSecret = {
        secret_enc: secretEnc,
        previous_secret_enc: current?.secret_enc ?? null,
        previous_valid_until: current ? previousValidUntil : null,
        created_at: now,
      };
      await tx.run(
        `INSERT INTO webhook_workspace_secrets (tenant_id, secret_enc, previous_secret_enc, previous_valid_until, created_at)
         VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (tenant_id) DO UPDATE SET secret_enc = excluded.secret_enc, previous_secret_enc = excluded.previous_secret_enc,
           previous_valid_until = excluded.previous_valid_until, created_at = excluded.created_at`,
        [tenantId, next.secret_enc, next.previous_secret_enc, next.previous_valid_until, next.created_at],
      );
      return next;
    });
  }

  async remove(tenantId: string): Promise<boolean> {
    return (await this.sql.run('DELETE FROM webhook_workspace_secrets WHERE tenant_id = ?', [tenantId])) > 0;
  }
}
