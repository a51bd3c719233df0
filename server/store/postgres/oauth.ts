import { Conflict } from '../../domain/errors.ts';
import { toFlow, toProvider, toToken, type FlowRecord, type OAuthStore, type ProviderRecord, type TokenRecord } from '../oauth.ts';
import { isUniqueViolation, type PgDb } from './db.ts';

/** The OAuth tables on PostgreSQL (mirrors `../oauth.ts`). */
export class PgOAuthStore implements OAuthStore {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async createProvider(p: ProviderRecord): Promise<void> {
    try {
      await this.#db.run(
        `INSERT INTO oauth_providers (id, organization_id, provider_id, name, client_id, client_secret_sealed, auth_url, token_url,
           uses_pkce, code_challenge_method, token_endpoint_auth_method, provider_type, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [p.id, p.organization_id, p.provider_id, p.name, p.client_id, p.client_secret_sealed, p.auth_url, p.token_url, p.uses_pkce ? 1 : 0, p.code_challenge_method, p.token_endpoint_auth_method, p.provider_type, p.created_at, p.updated_at],
      );
    } catch (error) {
      if (isUniqueViolation(error)) throw new Conflict(`An OAuth provider with provider_id '${p.provider_id}' already exists in this organization.`);
      throw error;
    }
  }

  async listProviders(organizationId: string): Promise<ProviderRecord[]> {
    return (await this.#db.rows('SELECT * FROM oauth_providers WHERE organization_id = ? ORDER BY created_at DESC, rowid DESC', [organizationId])).map(toProvider);
  }

  async getProvider(organizationId: string, id: string): Promise<ProviderRecord | null> {
    const row = await this.#db.row('SELECT * FROM oauth_providers WHERE id = ? AND organization_id = ?', [id, organizationId]);
    return row ? toProvider(row) : null;
  }

  async getProviderBySlug(organizationId: string, providerId: string): Promise<ProviderRecord | null> {
    const row = await this.#db.row('SELECT * FROM oauth_providers WHERE provider_id = ? AND organization_id = ?', [providerId, organizationId]);
    return row ? toProvider(row) : null;
  }

  async updateProvider(p: ProviderRecord): Promise<boolean> {
    const changed = await this.#db.run(
      `UPDATE oauth_providers SET name = ?, client_id = ?, client_secret_sealed = ?, auth_url = ?, token_url = ?, uses_pkce = ?,
         code_challenge_method = ?, token_endpoint_auth_method = ?, provider_type = ?, updated_at = ?
       WHERE id = ? AND organization_id = ?`,
      [p.name, p.client_id, p.client_secret_sealed, p.auth_url, p.token_url, p.uses_pkce ? 1 : 0, p.code_challenge_method, p.token_endpoint_auth_method, p.provider_type, p.updated_at, p.id, p.organization_id],
    );
    return changed === 1;
  }

  async deleteProvider(organizationId: string, id: string): Promise<boolean> {
    // Flows and tokens go with it (ON DELETE CASCADE), in the statement's own transaction.
    return (await this.#db.run('DELETE FROM oauth_providers WHERE id = ? AND organization_id = ?', [id, organizationId])) === 1;
  }

  async createFlow(f: FlowRecord, forgetBefore: string): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      await db.run('DELETE FROM oauth_flows WHERE organization_id = ? AND created_at < ?', [f.organization_id, forgetBefore], c);
      await db.run(
        `INSERT INTO oauth_flows (id, organization_id, workspace_id, provider_ref, state_hash, user_id, agent_id, scopes, redirect_uri, code_verifier_sealed,
           is_default, status, error, error_description, token_ref, created_at, expires_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [f.id, f.organization_id, f.workspace_id, f.provider_ref, f.state_hash, f.user_id, f.agent_id, JSON.stringify(f.scopes), f.redirect_uri, f.code_verifier_sealed, f.is_default ? 1 : 0, f.status, f.error, f.error_description_sealed, f.token_ref, f.created_at, f.expires_at, f.updated_at],
        c,
      );
    });
  }

  async getFlow(workspaceId: string, id: string): Promise<FlowRecord | null> {
    const row = await this.#db.row('SELECT * FROM oauth_flows WHERE id = ? AND workspace_id = ?', [id, workspaceId]);
    return row ? toFlow(row) : null;
  }

  async findFlowByState(stateHash: string): Promise<FlowRecord | null> {
    const row = await this.#db.row('SELECT * FROM oauth_flows WHERE state_hash = ?', [stateHash]);
    return row ? toFlow(row) : null;
  }

  async claimFlow(id: string, now: string): Promise<boolean> {
    // One statement: of two callbacks racing, exactly one moves the flow from pending.
    return (await this.#db.run("UPDATE oauth_flows SET status = 'exchanging', updated_at = ? WHERE id = ? AND status = 'pending' AND expires_at > ?", [now, id, now])) === 1;
  }

  async completeFlow(flowId: string, t: TokenRecord, now: string): Promise<TokenRecord> {
    const db = this.#db;
    return db.tx(async (c) => {
      const row = await db.row(
        `INSERT INTO oauth_tokens (id, organization_id, workspace_id, provider_ref, user_id, agent_id, scopes, access_token_sealed, refresh_token_sealed,
           token_type, expires_at, is_default, provider_account_label, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (provider_ref, workspace_id, user_id, agent_id) DO UPDATE SET
           scopes = excluded.scopes, access_token_sealed = excluded.access_token_sealed,
           refresh_token_sealed = excluded.refresh_token_sealed, token_type = excluded.token_type,
           expires_at = excluded.expires_at, is_default = excluded.is_default, updated_at = excluded.updated_at
         RETURNING *`,
        [t.id, t.organization_id, t.workspace_id, t.provider_ref, t.user_id, t.agent_id, JSON.stringify(t.scopes), t.access_token_sealed, t.refresh_token_sealed, t.token_type, t.expires_at, t.is_default ? 1 : 0, t.provider_account_label, t.created_at, t.updated_at],
        c,
      );
      const stored = toToken(row!);
      // The verifier has done its job: drop it with the flow's completion.
      await db.run("UPDATE oauth_flows SET status = 'completed', token_ref = ?, code_verifier_sealed = NULL, updated_at = ? WHERE id = ? AND status = 'exchanging'", [stored.id, now, flowId], c);
      return stored;
    });
  }

  async failFlow(id: string, error: string, descriptionSealed: string | null, now: string): Promise<void> {
    await this.#db.run(
      "UPDATE oauth_flows SET status = 'failed', error = ?, error_description = ?, code_verifier_sealed = NULL, updated_at = ? WHERE id = ? AND status IN ('pending', 'exchanging')",
      [error, descriptionSealed, now, id],
    );
  }

  async getToken(providerRef: string, workspaceId: string, userId: string, agentId: string): Promise<TokenRecord | null> {
    const row = await this.#db.row('SELECT * FROM oauth_tokens WHERE provider_ref = ? AND workspace_id = ? AND user_id = ? AND agent_id = ?', [providerRef, workspaceId, userId, agentId]);
    return row ? toToken(row) : null;
  }

  async getTokenById(id: string): Promise<TokenRecord | null> {
    const row = await this.#db.row('SELECT * FROM oauth_tokens WHERE id = ?', [id]);
    return row ? toToken(row) : null;
  }

  async listTokens(workspaceId: string, providerRef: string | null): Promise<TokenRecord[]> {
    const rows =
      providerRef === null
        ? await this.#db.rows('SELECT * FROM oauth_tokens WHERE workspace_id = ? ORDER BY created_at DESC, rowid DESC', [workspaceId])
        : await this.#db.rows('SELECT * FROM oauth_tokens WHERE workspace_id = ? AND provider_ref = ? ORDER BY created_at DESC, rowid DESC', [workspaceId, providerRef]);
    return rows.map(toToken);
  }

  async deleteTokens(workspaceId: string, providerRef: string): Promise<number> {
    return this.#db.run('DELETE FROM oauth_tokens WHERE workspace_id = ? AND provider_ref = ?', [workspaceId, providerRef]);
  }

  async updateTokenMetadata(id: string, workspaceId: string, f: { is_default: boolean; provider_account_label: string | null; updated_at: string }): Promise<boolean> {
    return (await this.#db.run('UPDATE oauth_tokens SET is_default = ?, provider_account_label = ?, updated_at = ? WHERE id = ? AND workspace_id = ?', [f.is_default ? 1 : 0, f.provider_account_label, f.updated_at, id, workspaceId])) === 1;
  }

  async updateToken(t: TokenRecord): Promise<void> {
    await this.#db.run('UPDATE oauth_tokens SET scopes = ?, access_token_sealed = ?, refresh_token_sealed = ?, token_type = ?, expires_at = ?, updated_at = ? WHERE id = ?', [
      JSON.stringify(t.scopes),
      t.access_token_sealed,
      t.refresh_token_sealed,
      t.token_type,
      t.expires_at,
      t.updated_at,
      t.id,
    ]);
  }

  async deleteToken(id: string): Promise<void> {
    await this.#db.run('DELETE FROM oauth_tokens WHERE id = ?', [id]);
  }
}
