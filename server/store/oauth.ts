import type { CodeChallengeMethod, TokenEndpointAuthMethod } from '../../shared/schemas/oauth.ts';
import type { Row } from './db.ts';
import { columns } from './rows.ts';
import { SqlStore } from './sql-store.ts';

/** A provider as stored; the client secret stays sealed until a token request needs it. */
export type ProviderRecord = {
  id: string;
  organization_id: string;
  provider_id: string;
  name: string;
  client_id: string;
  /** Null for a public client (`token_endpoint_auth_method` `none`). */
  client_secret_sealed: string | null;
  auth_url: string;
  token_url: string;
  uses_pkce: boolean;
  code_challenge_method: CodeChallengeMethod;
  token_endpoint_auth_method: TokenEndpointAuthMethod;
  provider_type: string | null;
  created_at: string;
  updated_at: string;
};

/** One stored token per (provider, workspace, user_id, agent_id); `''` stands for "not given". */
export type TokenRecord = {
  id: string;
  organization_id: string;
  workspace_id: string;
  provider_ref: string;
  user_id: string;
  agent_id: string;
  scopes: string[];
  access_token_sealed: string;
  refresh_token_sealed: string | null;
  token_type: string | null;
  expires_at: string | null;
  is_default: boolean;
  provider_account_label: string | null;
  created_at: string;
  updated_at: string;
};

export type FlowStatus = 'pending' | 'exchanging' | 'completed' | 'failed';

export type FlowRecord = {
  id: string;
  organization_id: string;
  /** The workspace of the key that started the flow: the token it obtains is that workspace's. */
  workspace_id: string;
  provider_ref: string;
  state_hash: string;
  user_id: string;
  agent_id: string;
  scopes: string[];
  redirect_uri: string;
  code_verifier_sealed: string | null;
  is_default: boolean;
  status: FlowStatus;
  error: string | null;
  /** Sealed: it may quote the provider's answer. */
  error_description_sealed: string | null;
  token_ref: string | null;
  created_at: string;
  expires_at: string;
  updated_at: string;
};

/** What the OAuth domain needs from storage; async so another database can implement it. */
export interface OAuthStore {
  createProvider(provider: ProviderRecord): Promise<void>;
  /** Every provider of the organization, newest first. */
  listProviders(organizationId: string): Promise<ProviderRecord[]>;
  getProvider(organizationId: string, id: string): Promise<ProviderRecord | null>;
  getProviderBySlug(organizationId: string, providerId: string): Promise<ProviderRecord | null>;
  /** Writes every mutable field of `provider`; false when it no longer exists. */
  updateProvider(provider: ProviderRecord): Promise<boolean>;
  /** Deletes the provider with its flows and tokens; false when it does not exist. */
  deleteProvider(organizationId: string, id: string): Promise<boolean>;

  /** Stores a new flow, and deletes the organization's flows created before `forgetBefore`. */
  createFlow(flow: FlowRecord, forgetBefore: string): Promise<void>;
  /** The flow, if it was started in this workspace. */
  getFlow(workspaceId: string, id: string): Promise<FlowRecord | null>;
  findFlowByState(stateHash: string): Promise<FlowRecord | null>;
  /** Moves a pending, unexpired flow to `exchanging`; false when another request got there first. */
  claimFlow(id: string, now: string): Promise<boolean>;
  /** Stores the token (replacing the one for the same owner) and completes the flow, atomically. */
  completeFlow(flowId: string, token: TokenRecord, now: string): Promise<TokenRecord>;
  failFlow(id: string, error: string, descriptionSealed: string | null, now: string): Promise<void>;

  getToken(providerRef: string, workspaceId: string, userId: string, agentId: string): Promise<TokenRecord | null>;
  getTokenById(id: string): Promise<TokenRecord | null>;
  /** The workspace's tokens, optionally of one provider, newest first. */
  listTokens(workspaceId: string, providerRef: string | null): Promise<TokenRecord[]>;
  /** Deletes the workspace's tokens of a provider; how many. */
  deleteTokens(workspaceId: string, providerRef: string): Promise<number>;
  updateTokenMetadata(
    id: string,
    workspaceId: string,
    fields: { is_default: boolean; provider_account_label: string | null; updated_at: string },
  ): Promise<boolean>;
  /** Replaces the token's secrets and expiry after a refresh. */
  updateToken(token: TokenRecord): Promise<void>;
  deleteToken(id: string): Promise<void>;
}

/** A provider's settings, in the column order both its INSERT and its UPDATE write them. */
function providerSettings(p: ProviderRecord): unknown[] {
  return [
    p.name,
    p.client_id,
    p.client_secret_sealed,
    p.auth_url,
    p.token_url,
    p.uses_pkce ? 1 : 0,
    p.code_challenge_method,
    p.token_endpoint_auth_method,
    p.provider_type,
  ];
}

/** The OAuth tables, on either database. */
export class SqlOAuthStore extends SqlStore implements OAuthStore {
  async createProvider(p: ProviderRecord): Promise<void> {
    await this.refusingDuplicate({ kind: 'oauth_provider_taken', providerId: p.provider_id }, async () => {
      await this.sql.run(
        `INSERT INTO oauth_providers (id, organization_id, provider_id, name, client_id, client_secret_sealed, auth_url, token_url,
           uses_pkce, code_challenge_method, token_endpoint_auth_method, provider_type, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [p.id, p.organization_id, p.provider_id, ...providerSettings(p), p.created_at, p.updated_at],
      );
    });
  }

  async listProviders(organizationId: string): Promise<ProviderRecord[]> {
    return (await this.sql.rows('SELECT * FROM oauth_providers WHERE organization_id = ? ORDER BY created_at DESC, rowid DESC', [organizationId])).map(
      toProvider,
    );
  }

  async getProvider(organizationId: string, id: string): Promise<ProviderRecord | null> {
    return this.first(toProvider, 'SELECT * FROM oauth_providers WHERE id = ? AND organization_id = ?', [id, organizationId]);
  }

  async getProviderBySlug(organizationId: string, providerId: string): Promise<ProviderRecord | null> {
    return this.first(toProvider, 'SELECT * FROM oauth_providers WHERE provider_id = ? AND organization_id = ?', [providerId, organizationId]);
  }

  async updateProvider(p: ProviderRecord): Promise<boolean> {
    const changed = await this.sql.run(
      `UPDATE oauth_providers SET name = ?, client_id = ?, client_secret_sealed = ?, auth_url = ?, token_url = ?, uses_pkce = ?,
         code_challenge_method = ?, token_endpoint_auth_method = ?, provider_type = ?, updated_at = ?
       WHERE id = ? AND organization_id = ?`,
      [...providerSettings(p), p.updated_at, p.id, p.organization_id],
    );
    return changed === 1;
  }

  async deleteProvider(organizationId: string, id: string): Promise<boolean> {
    // Flows and tokens go with it (ON DELETE CASCADE), in the statement's own transaction.
    return (await this.sql.run('DELETE FROM oauth_providers WHERE id = ? AND organization_id = ?', [id, organizationId])) === 1;
  }

  async createFlow(f: FlowRecord, forgetBefore: string): Promise<void> {
    await this.sql.tx(async (tx) => {
      await tx.run('DELETE FROM oauth_flows WHERE organization_id = ? AND created_at < ?', [f.organization_id, forgetBefore]);
      await tx.run(
        `INSERT INTO oauth_flows (id, organization_id, workspace_id, provider_ref, state_hash, user_id, agent_id, scopes, redirect_uri, code_verifier_sealed,
           is_default, status, error, error_description, token_ref, created_at, expires_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          f.id,
          f.organization_id,
          f.workspace_id,
          f.provider_ref,
          f.state_hash,
          f.user_id,
          f.agent_id,
          JSON.stringify(f.scopes),
          f.redirect_uri,
          f.code_verifier_sealed,
          f.is_default ? 1 : 0,
          f.status,
          f.error,
          f.error_description_sealed,
          f.token_ref,
          f.created_at,
          f.expires_at,
          f.updated_at,
        ],
      );
    });
  }

  async getFlow(workspaceId: string, id: string): Promise<FlowRecord | null> {
    return this.first(toFlow, 'SELECT * FROM oauth_flows WHERE id = ? AND workspace_id = ?', [id, workspaceId]);
  }

  async findFlowByState(stateHash: string): Promise<FlowRecord | null> {
    return this.first(toFlow, 'SELECT * FROM oauth_flows WHERE state_hash = ?', [stateHash]);
  }

  async claimFlow(id: string, now: string): Promise<boolean> {
    // One statement: of two callbacks racing, exactly one moves the flow from pending.
    return (
      (await this.sql.run("UPDATE oauth_flows SET status = 'exchanging', updated_at = ? WHERE id = ? AND status = 'pending' AND expires_at > ?", [
        now,
        id,
        now,
      ])) === 1
    );
  }

  async completeFlow(flowId: string, t: TokenRecord, now: string): Promise<TokenRecord> {
    return this.sql.tx(async (tx) => {
      const row = await tx.row(
        `INSERT INTO oauth_tokens (id, organization_id, workspace_id, provider_ref, user_id, agent_id, scopes, access_token_sealed, refresh_token_sealed,
           token_type, expires_at, is_default, provider_account_label, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (provider_ref, workspace_id, user_id, agent_id) DO UPDATE SET
           scopes = excluded.scopes, access_token_sealed = excluded.access_token_sealed,
           refresh_token_sealed = excluded.refresh_token_sealed, token_type = excluded.token_type,
           expires_at = excluded.expires_at, is_default = excluded.is_default, updated_at = excluded.updated_at
         RETURNING *`,
        [
          t.id,
          t.organization_id,
          t.workspace_id,
          t.provider_ref,
          t.user_id,
          t.agent_id,
          JSON.stringify(t.scopes),
          t.access_token_sealed,
          t.refresh_token_sealed,
          t.token_type,
          t.expires_at,
          t.is_default ? 1 : 0,
          t.provider_account_label,
          t.created_at,
          t.updated_at,
        ],
      );
      const stored = toToken(row!);
      // The verifier has done its job: drop it with the flow's completion.
      await tx.run(
        "UPDATE oauth_flows SET status = 'completed', token_ref = ?, code_verifier_sealed = NULL, updated_at = ? WHERE id = ? AND status = 'exchanging'",
        [stored.id, now, flowId],
      );
      return stored;
    });
  }

  async failFlow(id: string, error: string, descriptionSealed: string | null, now: string): Promise<void> {
    await this.sql.run(
      "UPDATE oauth_flows SET status = 'failed', error = ?, error_description = ?, code_verifier_sealed = NULL, updated_at = ? WHERE id = ? AND status IN ('pending', 'exchanging')",
      [error, descriptionSealed, now, id],
    );
  }

  async getToken(providerRef: string, workspaceId: string, userId: string, agentId: string): Promise<TokenRecord | null> {
    return this.first(toToken, 'SELECT * FROM oauth_tokens WHERE provider_ref = ? AND workspace_id = ? AND user_id = ? AND agent_id = ?', [
      providerRef,
      workspaceId,
      userId,
      agentId,
    ]);
  }

  async getTokenById(id: string): Promise<TokenRecord | null> {
    return this.first(toToken, 'SELECT * FROM oauth_tokens WHERE id = ?', [id]);
  }

  async listTokens(workspaceId: string, providerRef: string | null): Promise<TokenRecord[]> {
    const rows =
      providerRef === null
        ? await this.sql.rows('SELECT * FROM oauth_tokens WHERE workspace_id = ? ORDER BY created_at DESC, rowid DESC', [workspaceId])
        : await this.sql.rows('SELECT * FROM oauth_tokens WHERE workspace_id = ? AND provider_ref = ? ORDER BY created_at DESC, rowid DESC', [
            workspaceId,
            providerRef,
          ]);
    return rows.map(toToken);
  }

  async deleteTokens(workspaceId: string, providerRef: string): Promise<number> {
    return this.sql.run('DELETE FROM oauth_tokens WHERE workspace_id = ? AND provider_ref = ?', [workspaceId, providerRef]);
  }

  async updateTokenMetadata(
    id: string,
    workspaceId: string,
    f: { is_default: boolean; provider_account_label: string | null; updated_at: string },
  ): Promise<boolean> {
    return (
      (await this.sql.run('UPDATE oauth_tokens SET is_default = ?, provider_account_label = ?, updated_at = ? WHERE id = ? AND workspace_id = ?', [
        f.is_default ? 1 : 0,
        f.provider_account_label,
        f.updated_at,
        id,
        workspaceId,
      ])) === 1
    );
  }

  async updateToken(t: TokenRecord): Promise<void> {
    await this.sql.run(
      'UPDATE oauth_tokens SET scopes = ?, access_token_sealed = ?, refresh_token_sealed = ?, token_type = ?, expires_at = ?, updated_at = ? WHERE id = ?',
      [JSON.stringify(t.scopes), t.access_token_sealed, t.refresh_token_sealed, t.token_type, t.expires_at, t.updated_at, t.id],
    );
  }

  async deleteToken(id: string): Promise<void> {
    await this.sql.run('DELETE FROM oauth_tokens WHERE id = ?', [id]);
  }
}

export function toProvider(row: Row): ProviderRecord {
  return {
    ...columns(row, {
      id: 'text',
      organization_id: 'text',
      provider_id: 'text',
      name: 'text',
      client_id: 'text',
      client_secret_sealed: 'text?',
      auth_url: 'text',
      token_url: 'text',
    }),
    uses_pkce: row.uses_pkce === 1,
    code_challenge_method: row.code_challenge_method as CodeChallengeMethod,
    token_endpoint_auth_method: row.token_endpoint_auth_method as TokenEndpointAuthMethod,
    ...columns(row, { provider_type: 'text?', created_at: 'text', updated_at: 'text' }),
  };
}

export function toToken(row: Row): TokenRecord {
  return {
    ...columns(row, { id: 'text', organization_id: 'text', workspace_id: 'text', provider_ref: 'text', user_id: 'text', agent_id: 'text' }),
    scopes: JSON.parse(row.scopes as string) as string[],
    ...columns(row, { access_token_sealed: 'text', refresh_token_sealed: 'text?', token_type: 'text?', expires_at: 'text?' }),
    is_default: row.is_default === 1,
    ...columns(row, { provider_account_label: 'text?', created_at: 'text', updated_at: 'text' }),
  };
}

export function toFlow(row: Row): FlowRecord {
  return {
    ...columns(row, { id: 'text', organization_id: 'text', workspace_id: 'text', provider_ref: 'text', state_hash: 'text', user_id: 'text', agent_id: 'text' }),
    scopes: JSON.parse(row.scopes as string) as string[],
    ...columns(row, { redirect_uri: 'text', code_verifier_sealed: 'text?' }),
    is_default: row.is_default === 1,
    status: row.status as FlowStatus,
    ...columns(row, { error: 'text?' }),
    error_description_sealed: (row.error_description as string | null) ?? null,
    ...columns(row, { token_ref: 'text?', created_at: 'text', expires_at: 'text', updated_at: 'text' }),
  };
}
