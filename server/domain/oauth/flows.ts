import type { AuthenticateRequest, AuthenticateResponse, WaitResponse } from '../../../shared/schemas/oauth.ts';
import type { SecretBox } from '../../crypto/secret-box.ts';
import type { Clock } from '../../lib/clock.ts';
import { RevisionWatch } from '../../lib/revision-watch.ts';
import type { Logger } from '../../logger.ts';
import type { FlowRecord, OAuthStore } from '../../store/oauth.ts';
import type { OutboundPolicy } from './outbound.ts';
import { codeChallenge, hashState, newCodeVerifier, newState } from './pkce.ts';
import type { OAuthProviders } from './providers.ts';
import { excerpt, providerErrorCode, requestToken } from './token-request.ts';
import { type OAuthTokens, sealIssuedToken, type TokenOwner } from './tokens.ts';

/** How long a user has to finish at the provider; a later callback is refused (400). */
export const FLOW_TTL_MS = 10 * 60 * 1000;
/** Longer than a token request may take (15 s): an `exchanging` flow older than its expiry plus this was abandoned. */
const EXCHANGE_GRACE_MS = 60_000;
/** Finished or abandoned flows are kept this long (for `wait`), then deleted as new flows start. */
export const FLOW_RETENTION_MS = 24 * 60 * 60 * 1000;

export type CallbackQuery = { state?: string; code?: string; error?: string; error_description?: string };

/** What the callback page tells the user; the route turns it into HTML and a status. */
export type CallbackOutcome =
  | { kind: 'completed' }
  /** Unknown, used or expired state: nothing was changed (400). */
  | { kind: 'invalid_state'; message: string }
  /** The flow ended without a token: the provider's error, or a failed code exchange. */
  | { kind: 'failed'; error: string; description: string | null; providerUnavailable: boolean };

/**
 * Authorization-code flows: start one (state + PKCE), finish it in the callback by exchanging the
 * code, and let the agent wait for the outcome. A flow's state lives in the database; waiters are
 * woken by the same watch class the revision long-poll uses, keyed by flow id (shared across
 * processes when the control plane gives a shared one), and read the flow again when woken.
 */
export class OAuthFlows {
  readonly #store: OAuthStore;
  readonly #box: SecretBox;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #providers: OAuthProviders;
  readonly #tokens: OAuthTokens;
  readonly #publicUrl: () => string;
  readonly #policy: OutboundPolicy;
  readonly #watch: RevisionWatch;

  constructor(deps: {
    store: OAuthStore;
    secretBox: SecretBox;
    clock: Clock;
    log: Logger;
    providers: OAuthProviders;
    tokens: OAuthTokens;
    publicUrl: () => string;
    policy: OutboundPolicy;
    watch?: RevisionWatch;
  }) {
    this.#store = deps.store;
    this.#box = deps.secretBox;
    this.#clock = deps.clock;
    this.#log = deps.log;
    this.#providers = deps.providers;
    this.#tokens = deps.tokens;
    this.#publicUrl = deps.publicUrl;
    this.#policy = deps.policy;
    // Shared across processes when given: the callback may reach another process than the wait.
    this.#watch = deps.watch ?? new RevisionWatch();
  }

  /** `redirect_uri` registered with providers: PUBLIC_URL + the callback path. */
  redirectUri(): string {
    return `${this.#publicUrl()}/v2/auth/callback`;
  }

  /**
   * A stored token of the caller's workspace that covers the request, or a new pending flow whose
   * token will be that workspace's. Providers are the organization's; tokens are the workspace's.
   */
  async authenticate(caller: { organizationId: string; workspaceId: string }, body: AuthenticateRequest): Promise<AuthenticateResponse> {
    const { organizationId } = caller;
    const provider = await this.#providers.bySlug(organizationId, body.provider);
    const userId = body.user_id ?? body.ls_user_id ?? '';
    const owner: TokenOwner = { workspaceId: caller.workspaceId, userId, agentId: body.agent_id ?? '' };
    const scopes = [...new Set(body.scopes)];
    const answerUser = userId === '' ? null : userId;
    if (!body.force_new) {
      const usable = await this.#tokens.usable(provider, owner, scopes, body.token_id ?? null);
      if (usable !== null) {
        const { record } = usable;
        const metadata = {
          token_id: record.id,
          scopes: record.scopes,
          expires_at: record.expires_at,
          token_type: record.token_type,
          is_default: record.is_default,
          provider_account_label: record.provider_account_label,
        };
        return { status: 'completed', url: null, auth_id: null, token: usable.accessToken, user_id: answerUser, metadata };
      }
    }

    const now = this.#clock.now();
    const state = newState();
    const verifier = provider.uses_pkce ? newCodeVerifier() : null;
    const flow: FlowRecord = {
      id: crypto.randomUUID(),
      organization_id: organizationId,
      workspace_id: caller.workspaceId,
      provider_ref: provider.id,
      state_hash: hashState(state),
      user_id: owner.userId,
      agent_id: owner.agentId,
      scopes,
      redirect_uri: this.redirectUri(),
      code_verifier_sealed: verifier === null ? null : this.#box.encrypt(verifier),
      is_default: body.is_default,
      status: 'pending',
      error: null,
      error_description_sealed: null,
      token_ref: null,
      created_at: now,
      expires_at: new Date(Date.parse(now) + FLOW_TTL_MS).toISOString(),
      updated_at: now,
    };
    await this.#store.createFlow(flow, new Date(Date.parse(now) - FLOW_RETENTION_MS).toISOString());

    const url = new URL(provider.auth_url);
    // Parameters the provider's auth_url already carries are kept; ours replace same-named ones.
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', provider.client_id);
    url.searchParams.set('redirect_uri', flow.redirect_uri);
    if (scopes.length > 0) url.searchParams.set('scope', scopes.join(' '));
    else url.searchParams.delete('scope');
    url.searchParams.set('state', state);
    if (verifier !== null) {
      url.searchParams.set('code_challenge', codeChallenge(verifier, provider.code_challenge_method));
      url.searchParams.set('code_challenge_method', provider.code_challenge_method);
    }
    this.#log.info('oauth flow started', {
      auth_id: flow.id,
      provider_id: provider.provider_id,
      organization_id: organizationId,
      workspace_id: caller.workspaceId,
    });
    return { status: 'pending', url: url.toString(), auth_id: flow.id, token: null, user_id: answerUser, metadata: null };
  }

  /**
   * The provider sent the user back: check the state, exchange the code, store the token. With
   * `providerSlug` (the `/v2/auth/callback/{provider_id}` form), the flow must be of that provider.
   */
  async callback(query: CallbackQuery, providerSlug: string | null = null): Promise<CallbackOutcome> {
    if (!query.state) return { kind: 'invalid_state', message: 'The request carries no state, so it belongs to no authorization.' };
    const flow = await this.#store.findFlowByState(hashState(query.state));
    if (!flow) return { kind: 'invalid_state', message: 'This authorization is unknown to this server.' };
    if (providerSlug !== null) {
      const provider = await this.#store.getProvider(flow.organization_id, flow.provider_ref);
      if (provider?.provider_id !== providerSlug) return { kind: 'invalid_state', message: 'This authorization is unknown to this server.' };
    }
    if (flow.status !== 'pending') return { kind: 'invalid_state', message: 'This authorization was already used.' };
    const now = this.#clock.now();
    if (flow.expires_at <= now) {
      await this.#fail(flow, 'expired', 'The user did not finish within 10 minutes.');
      return { kind: 'invalid_state', message: 'This authorization has expired; start a new one.' };
    }
    if (query.error) {
      // The provider's words reach the page and `wait` only as a short excerpt.
      const error = providerErrorCode(query.error);
      const description = excerpt(query.error_description);
      await this.#fail(flow, error, description);
      return { kind: 'failed', error, description, providerUnavailable: false };
    }
    if (!query.code) {
      await this.#fail(flow, 'invalid_request', 'The provider sent neither a code nor an error.');
      return { kind: 'failed', error: 'invalid_request', description: 'The provider sent neither a code nor an error.', providerUnavailable: false };
    }
    // Claim before the exchange, so a replayed callback cannot use the state (or the code) twice.
    if (!(await this.#store.claimFlow(flow.id, now))) return { kind: 'invalid_state', message: 'This authorization was already used.' };
    try {
      return await this.#exchange(flow, query.code);
    } catch (error) {
      // Whatever went wrong after the claim, the flow ends now rather than sitting in `exchanging`
      // until its expiry: the waiter hears of it at once. The error itself goes on to the 500 handler.
      await this.#fail(flow, 'server_error', 'The server could not finish this authorization; start a new one.').catch(() => undefined);
      throw error;
    }
  }

  /** Exchanges the code of a claimed flow and stores the token. */
  async #exchange(flow: FlowRecord, code: string): Promise<CallbackOutcome> {
    const provider = await this.#providers.byRef(flow.organization_id, flow.provider_ref);
    const params: Record<string, string> = { grant_type: 'authorization_code', code, redirect_uri: flow.redirect_uri };
    if (flow.code_verifier_sealed !== null) params.code_verifier = this.#box.decrypt(flow.code_verifier_sealed);
    const result = await requestToken(this.#providers.tokenClient(provider), params, this.#policy);
    if (!result.ok) {
      const description = result.description ?? `The provider answered ${result.error}.`;
      const error = result.kind === 'unavailable' ? 'token_exchange_failed' : result.error;
      await this.#fail(flow, error, description);
      return { kind: 'failed', error: result.error, description, providerUnavailable: result.kind === 'unavailable' };
    }
    const done = this.#clock.now();
    const token = sealIssuedToken(this.#box, result.token, {
      provider,
      owner: { workspaceId: flow.workspace_id, userId: flow.user_id, agentId: flow.agent_id },
      requestedScopes: flow.scopes,
      previousRefresh: null,
      now: done,
      isDefault: flow.is_default,
      label: null,
    });
    await this.#store.completeFlow(flow.id, token, done);
    this.#watch.notify(flow.id);
    this.#log.info('oauth flow completed', { auth_id: flow.id, provider_id: provider.provider_id, organization_id: flow.organization_id });
    return { kind: 'completed' };
  }

  /** Holds until the flow completes or fails, or `timeoutSeconds` pass. */
  async wait(workspaceId: string, authId: string, timeoutSeconds: number, signal?: AbortSignal): Promise<WaitResponse> {
    const deadline = Date.now() + timeoutSeconds * 1000;
    for (;;) {
      // Registered before the read, so a change announced while the read is under way (a callback
      // finished by another process, whose notice can arrive before a PostgreSQL read returns)
      // wakes this wait instead of passing unseen until the deadline.
      const waiter = this.#watch.wait(authId, Math.max(1, deadline - Date.now()), signal);
      try {
        // Only flows started in the caller's workspace: another workspace's flow is `not_found`.
        const flow = await this.#store.getFlow(workspaceId, authId);
        if (!flow) return { status: 'not_found', token: null, error: null, error_description: null };
        if (flow.status === 'completed') {
          const token = flow.token_ref === null ? null : await this.#tokens.accessToken(flow.token_ref);
          return { status: 'completed', token, error: null, error_description: null };
        }
        if (flow.status === 'failed') {
          const description = flow.error_description_sealed === null ? null : this.#box.decrypt(flow.error_description_sealed);
          return { status: 'failed', token: null, error: flow.error, error_description: description };
        }
        // A flow stuck in `exchanging` (the process stopped during the code exchange) is let go
        // once the exchange's own timeout is long past, so waiting on it cannot go on forever.
        const grace = flow.status === 'exchanging' ? EXCHANGE_GRACE_MS : 0;
        const untilExpiry = Date.parse(flow.expires_at) + grace - Date.parse(this.#clock.now());
        if (untilExpiry <= 0) {
          await this.#fail(flow, 'expired', 'The authorization did not finish within 10 minutes.');
          continue;
        }
        const remaining = deadline - Date.now();
        if (remaining <= 0 || signal?.aborted)
          return { status: timeoutSeconds === 0 ? 'pending' : 'timeout', token: null, error: null, error_description: null };
        // Wake on the flow's change, its expiry, or the deadline; then read the database again.
        await untilOrAfter(waiter.changed, untilExpiry + 1);
      } finally {
        waiter.cancel();
      }
    }
  }

  async #fail(flow: FlowRecord, error: string, description: string | null): Promise<void> {
    // Sealed: the description may quote the provider, whose words are not ours to keep in clear.
    await this.#store.failFlow(flow.id, error, description === null ? null : this.#box.encrypt(description), this.#clock.now());
    this.#watch.notify(flow.id);
    this.#log.info('oauth flow failed', { auth_id: flow.id, organization_id: flow.organization_id, error });
  }
}

/** Resolves when `promise` does or after `ms`, whichever comes first; the timer does not outlive it. */
function untilOrAfter(promise: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    promise.then(
      () => {
        clearTimeout(timer);
        resolve();
      },
      () => {
        clearTimeout(timer);
        resolve();
      },
    );
  });
}
