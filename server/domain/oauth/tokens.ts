import type { OAuthTokenMetadataPatch, OAuthTokenSummary } from '../../../shared/schemas/oauth.ts';
import type { SecretBox } from '../../crypto/secret-box.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../logger.ts';
import type { OAuthStore, ProviderRecord, TokenRecord } from '../../store/oauth.ts';
import { NotFound } from '../errors.ts';
import type { OutboundPolicy } from './outbound.ts';
import type { OAuthProviders } from './providers.ts';
import { type IssuedToken, requestToken } from './token-request.ts';

/**
 * A token with less life than this left is refreshed first, so the agent does not get one that
 * dies in its hands; for short-lived tokens, half their lifetime (else every call would refresh).
 */
export const EXPIRY_MARGIN_MS = 30_000;

function refreshMargin(record: TokenRecord): number {
  if (record.expires_at === null) return 0;
  const lifetime = Date.parse(record.expires_at) - Date.parse(record.updated_at);
  return Math.min(EXPIRY_MARGIN_MS, Math.max(0, lifetime / 2));
}

/** Whose token: the workspace that obtained it, and the user / agent (the empty string stands for "not given"). */
export type TokenOwner = { workspaceId: string; userId: string; agentId: string };

/** Whether `granted` covers every scope in `requested`. */
export function coversScopes(granted: readonly string[], requested: readonly string[]): boolean {
  const have = new Set(granted);
  return requested.every((scope) => have.has(scope));
}

/** Builds the stored form of a freshly issued token: both tokens sealed, expiry as a timestamp. */
export function sealIssuedToken(
  box: SecretBox,
  issued: IssuedToken,
  base: {
    provider: ProviderRecord;
    owner: TokenOwner;
    requestedScopes: string[];
    previousRefresh: string | null;
    now: string;
    isDefault: boolean;
    label: string | null;
  },
): TokenRecord {
  return {
    id: crypto.randomUUID(),
    organization_id: base.provider.organization_id,
    workspace_id: base.owner.workspaceId,
    provider_ref: base.provider.id,
    user_id: base.owner.userId,
    agent_id: base.owner.agentId,
    scopes: issued.scopes ?? base.requestedScopes,
    access_token_sealed: box.encrypt(issued.accessToken),
    // A refresh response without a new refresh token means: keep using the old one (RFC 6749 §6).
    refresh_token_sealed: issued.refreshToken !== null ? box.encrypt(issued.refreshToken) : base.previousRefresh,
    token_type: issued.tokenType,
    expires_at: issued.expiresIn === null ? null : new Date(Date.parse(base.now) + issued.expiresIn * 1000).toISOString(),
    is_default: base.isDefault,
    provider_account_label: base.label,
    created_at: base.now,
    updated_at: base.now,
  };
}

/**
 * Stored tokens: hands out one that covers the scopes, refreshing it first when it has (nearly)
 * expired. A refresh the provider rejects deletes the stored token, so the caller starts a new flow.
 */
export class OAuthTokens {
  readonly #store: OAuthStore;
  readonly #box: SecretBox;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #providers: OAuthProviders;
  readonly #policy: OutboundPolicy;
  /** One refresh per stored token at a time: with rotating refresh tokens, a second concurrent refresh would be seen as reuse. */
  readonly #refreshing = new Map<string, Promise<TokenRecord | null>>();
  /** Runs work while no other process on the database runs work of the same name (the coordination's). */
  readonly #exclusive: <T>(name: string, work: () => Promise<T>) => Promise<T>;

  constructor(deps: {
    store: OAuthStore;
    secretBox: SecretBox;
    clock: Clock;
    log: Logger;
    providers: OAuthProviders;
    policy: OutboundPolicy;
    exclusive?: <T>(name: string, work: () => Promise<T>) => Promise<T>;
  }) {
    this.#store = deps.store;
    this.#box = deps.secretBox;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#providers = deps.providers;
    this.#policy = deps.policy;
    this.#exclusive = deps.exclusive ?? ((_name, work) => work());
  }

  /**
   * The token for `owner` (or the token `tokenId`, which must be of the owner's workspace and this
   * provider) covering `scopes`, refreshed if needed; null when a new flow is needed.
   */
  async usable(
    provider: ProviderRecord,
    owner: TokenOwner,
    scopes: string[],
    tokenId: string | null = null,
  ): Promise<{ accessToken: string; record: TokenRecord } | null> {
    let record =
      tokenId === null
        ? await this.#store.getToken(provider.id, owner.workspaceId, owner.userId, owner.agentId)
        : await this.#inWorkspace(owner.workspaceId, tokenId);
    if (record && record.provider_ref !== provider.id) throw tokenNotFound(tokenId ?? record.id);
    if (!record || !coversScopes(record.scopes, scopes)) return null;
    if (this.#expiresWithin(record, refreshMargin(record))) {
      record = await this.#refreshOnce(provider, record);
      if (!record || !coversScopes(record.scopes, scopes) || this.#expiresWithin(record, 0)) return null;
    }
    return { accessToken: this.#box.decrypt(record.access_token_sealed), record };
  }

  async #inWorkspace(workspaceId: string, tokenId: string): Promise<TokenRecord> {
    const record = await this.#store.getTokenById(tokenId);
    // Another workspace's token does not exist for this caller.
    if (!record || record.workspace_id !== workspaceId) throw tokenNotFound(tokenId);
    return record;
  }

  /** The workspace's tokens (optionally of one provider, by slug or id), without secrets. */
  async list(organizationId: string, workspaceId: string, providerRef: string | null): Promise<OAuthTokenSummary[]> {
    const provider = providerRef === null ? null : await this.#providers.record(organizationId, providerRef);
    const records = await this.#store.listTokens(workspaceId, provider?.id ?? null);
    const slugs = new Map<string, string>();
    const out: OAuthTokenSummary[] = [];
    for (const record of records) {
      let slug = slugs.get(record.provider_ref);
      if (slug === undefined) {
        slug = (await this.#providers.byRef(organizationId, record.provider_ref)).provider_id;
        slugs.set(record.provider_ref, slug);
      }
      out.push(toSummary(record, slug));
    }
    return out;
  }

  /** Whether the workspace holds a token of the provider (for one owner when given). An unknown provider holds none. */
  async exists(organizationId: string, workspaceId: string, providerRef: string, owner: { userId?: string; agentId?: string }): Promise<boolean> {
    let provider: ProviderRecord;
    try {
      provider = await this.#providers.record(organizationId, providerRef);
    } catch (error) {
      if (error instanceof NotFound) return false;
      throw error;
    }
    const records = await this.#store.listTokens(workspaceId, provider.id);
    return records.some((r) => (owner.userId === undefined || r.user_id === owner.userId) && (owner.agentId === undefined || r.agent_id === owner.agentId));
  }

  /** Forgets the workspace's tokens of a provider; how many there were. */
  async deleteForProvider(organizationId: string, workspaceId: string, providerRef: string): Promise<{ provider: ProviderRecord; deleted: number }> {
    const provider = await this.#providers.record(organizationId, providerRef);
    const deleted = await this.#store.deleteTokens(workspaceId, provider.id);
    this.#log.info('oauth tokens deleted', { provider_id: provider.provider_id, workspace_id: workspaceId, count: deleted });
    return { provider, deleted };
  }

  async delete(organizationId: string, workspaceId: string, tokenId: string): Promise<void> {
    const record = await this.#inWorkspace(workspaceId, tokenId);
    if (record.organization_id !== organizationId) throw tokenNotFound(tokenId);
    await this.#store.deleteToken(record.id);
  }

  async patchMetadata(organizationId: string, workspaceId: string, tokenId: string, body: OAuthTokenMetadataPatch): Promise<OAuthTokenSummary> {
    const record = await this.#inWorkspace(workspaceId, tokenId);
    const next: TokenRecord = {
      ...record,
      is_default: body.is_default ?? record.is_default,
      // null leaves it as it is (as everywhere in this API); "" clears it.
      provider_account_label:
        body.provider_account_label == null ? record.provider_account_label : body.provider_account_label === '' ? null : body.provider_account_label,
      updated_at: this.#clock.now(),
    };
    if (!(await this.#store.updateTokenMetadata(record.id, workspaceId, next))) throw tokenNotFound(tokenId);
    const provider = await this.#providers.byRef(organizationId, record.provider_ref);
    return toSummary(next, provider.provider_id);
  }

  /** The access token of a stored token, as it is. */
  async accessToken(tokenId: string): Promise<string | null> {
    const record = await this.#store.getTokenById(tokenId);
    return record ? this.#box.decrypt(record.access_token_sealed) : null;
  }

  #expiresWithin(record: TokenRecord, ms: number): boolean {
    if (record.expires_at === null) return false;
    return Date.parse(record.expires_at) - Date.parse(this.#clock.now()) <= ms;
  }

  #refreshOnce(provider: ProviderRecord, record: TokenRecord): Promise<TokenRecord | null> {
    const running = this.#refreshing.get(record.id);
    if (running) return running;
    // Across processes too (a rotating refresh token used twice is seen as reuse): under a lock
    // named for the token; the second process then reads the token the first one stored.
    const refresh = this.#exclusive(`oauth-refresh:${record.id}`, () => this.#refresh(provider, record)).finally(() => this.#refreshing.delete(record.id));
    this.#refreshing.set(record.id, refresh);
    return refresh;
  }

  async #refresh(provider: ProviderRecord, stale: TokenRecord): Promise<TokenRecord | null> {
    // The caller read the token before a refresh that has just finished may have renewed it (on a
    // store whose reads really wait, such as PostgreSQL): read it again, and use it when it was.
    const record = await this.#store.getTokenById(stale.id);
    if (!record) return null;
    if (!this.#expiresWithin(record, refreshMargin(record))) return record;
    if (record.refresh_token_sealed === null) return null;
    const result = await requestToken(
      this.#providers.tokenClient(provider),
      { grant_type: 'refresh_token', refresh_token: this.#box.decrypt(record.refresh_token_sealed) },
      this.#policy,
    );
    const fields = { auth: 'refresh', provider_id: provider.provider_id, organization_id: provider.organization_id };
    if (!result.ok) {
      // The provider's own text stays out of the log: it is the provider's (or a tenant's) to say anything in.
      this.#log.warn('oauth token refresh failed', { ...fields, error: result.error, kind: result.kind });
      // A rejected refresh token is dead: forget it. An unreachable or garbled provider may come back, so keep it.
      if (result.kind === 'rejected') await this.#store.deleteToken(record.id);
      return null;
    }
    const now = this.#clock.now();
    const sealed = sealIssuedToken(this.#box, result.token, {
      provider,
      owner: { workspaceId: record.workspace_id, userId: record.user_id, agentId: record.agent_id },
      requestedScopes: record.scopes,
      previousRefresh: record.refresh_token_sealed,
      now,
      isDefault: record.is_default,
      label: record.provider_account_label,
    });
    const updated: TokenRecord = { ...sealed, id: record.id, created_at: record.created_at };
    await this.#store.updateToken(updated);
    this.#log.info('oauth token refreshed', fields);
    return updated;
  }
}

function tokenNotFound(id: string): NotFound {
  return new NotFound(`OAuth token ID ${id} not found.`);
}

/** The API shape of a stored token: what it is for, never the token. */
export function toSummary(record: TokenRecord, providerSlug: string): OAuthTokenSummary {
  return {
    id: record.id,
    provider_id: providerSlug,
    user_id: record.user_id === '' ? null : record.user_id,
    agent_id: record.agent_id === '' ? null : record.agent_id,
    provider_account_label: record.provider_account_label,
    scopes: record.scopes,
    expires_at: record.expires_at,
    is_default: record.is_default,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}
