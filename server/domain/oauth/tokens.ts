import type { SecretBox } from '../../crypto/secret-box.ts';
import type { Logger } from '../../logger.ts';
import type { OAuthStore, ProviderRecord, TokenRecord } from '../../store/oauth.ts';
import type { Clock } from '../clock.ts';
import type { OAuthProviders } from './providers.ts';
import { requestToken, type IssuedToken } from './token-request.ts';

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

/** Whose token: the empty string stands for "not given". */
export type TokenOwner = { userId: string; agentId: string };

/** Whether `granted` covers every scope in `requested`. */
export function coversScopes(granted: readonly string[], requested: readonly string[]): boolean {
  const have = new Set(granted);
  return requested.every((scope) => have.has(scope));
}

/** Builds the stored form of a freshly issued token: both tokens sealed, expiry as a timestamp. */
export function sealIssuedToken(
  box: SecretBox,
  issued: IssuedToken,
  base: { provider: ProviderRecord; owner: TokenOwner; requestedScopes: string[]; previousRefresh: string | null; now: string },
): TokenRecord {
  return {
    id: crypto.randomUUID(),
    organization_id: base.provider.organization_id,
    provider_ref: base.provider.id,
    user_id: base.owner.userId,
    agent_id: base.owner.agentId,
    scopes: issued.scopes ?? base.requestedScopes,
    access_token_sealed: box.encrypt(issued.accessToken),
    // A refresh response without a new refresh token means: keep using the old one (RFC 6749 §6).
    refresh_token_sealed: issued.refreshToken !== null ? box.encrypt(issued.refreshToken) : base.previousRefresh,
    token_type: issued.tokenType,
    expires_at: issued.expiresIn === null ? null : new Date(Date.parse(base.now) + issued.expiresIn * 1000).toISOString(),
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
  /** One refresh per stored token at a time: with rotating refresh tokens, a second concurrent refresh would be seen as reuse. */
  readonly #refreshing = new Map<string, Promise<TokenRecord | null>>();

  constructor(deps: { store: OAuthStore; secretBox: SecretBox; clock: Clock; log: Logger; providers: OAuthProviders }) {
    this.#store = deps.store;
    this.#box = deps.secretBox;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#providers = deps.providers;
  }

  /** The access token for `owner` covering `scopes`, refreshed if needed; null when a new flow is needed. */
  async usable(provider: ProviderRecord, owner: TokenOwner, scopes: string[]): Promise<string | null> {
    let record = await this.#store.getToken(provider.id, owner.userId, owner.agentId);
    if (!record || !coversScopes(record.scopes, scopes)) return null;
    if (this.#expiresWithin(record, refreshMargin(record))) {
      record = await this.#refreshOnce(provider, record);
      if (!record || !coversScopes(record.scopes, scopes) || this.#expiresWithin(record, 0)) return null;
    }
    return this.#box.decrypt(record.access_token_sealed);
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
    const refresh = this.#refresh(provider, record).finally(() => this.#refreshing.delete(record.id));
    this.#refreshing.set(record.id, refresh);
    return refresh;
  }

  async #refresh(provider: ProviderRecord, record: TokenRecord): Promise<TokenRecord | null> {
    if (record.refresh_token_sealed === null) return null;
    const result = await requestToken(this.#providers.tokenClient(provider), {
      grant_type: 'refresh_token',
      refresh_token: this.#box.decrypt(record.refresh_token_sealed),
    });
    const fields = { auth: 'refresh', provider_id: provider.provider_id, organization_id: provider.organization_id };
    if (!result.ok) {
      this.#log.warn('oauth token refresh failed', { ...fields, error: result.error, error_description: result.description, kind: result.kind });
      // A rejected refresh token is dead: forget it. An unreachable provider may come back, so keep it.
      if (result.kind === 'rejected') await this.#store.deleteToken(record.id);
      return null;
    }
    const now = this.#clock.now();
    const sealed = sealIssuedToken(this.#box, result.token, {
      provider,
      owner: { userId: record.user_id, agentId: record.agent_id },
      requestedScopes: record.scopes,
      previousRefresh: record.refresh_token_sealed,
      now,
    });
    const updated: TokenRecord = { ...sealed, id: record.id, created_at: record.created_at };
    await this.#store.updateToken(updated);
    this.#log.info('oauth token refreshed', fields);
    return updated;
  }
}
