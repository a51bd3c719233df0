import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { GithubIntegration } from '../../shared/schemas/integration.ts';
import { sameText } from '../crypto/same-text.ts';
import { BadRequest, Conflict, DomainError } from '../domain/errors.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import type { GithubStore, InstallationAccount, LinkAttempt, SetupState } from '../store/github.ts';
import type { Store } from '../store/types.ts';
import { installPageUrl } from './app-settings.ts';
import { type GithubApi, GithubApiError } from './github-api.ts';

/** How long an install URL's `state`, and a link attempt, stay usable. */
const STATE_TTL_MS = 15 * 60_000;
/** Pages of `/user/installations` read at most (100 each): a user in more installations than this is not served. */
const MAX_INSTALLATION_PAGES = 10;

/** What the setup URL received: GitHub's query parameters, any of which a forger may change. */
export type SetupQuery = { installation_id?: string; setup_action?: string; state?: string; code?: string };

/** The workspace a link goes to, as the confirmation page names it. */
export type LinkTarget = { workspace_id: string; workspace_name: string; integration_name: string | null };

export type SetupOutcome =
  /** No `code`: the browser goes through GitHub's OAuth authorization, which comes back with one. */
  | { kind: 'authorize'; url: string }
  /** Proven: the installer confirms the link on a page naming the workspace (null: the page asks for a key of one). */
  | { kind: 'confirm'; attempt: string; confirm: string; installationId: number; account: InstallationAccount; target: LinkTarget | null }
  /** The installer asked an organization owner to approve: nothing to link until they do. */
  | { kind: 'requested' }
  | { kind: 'refused'; message: string; status: 400 | 409 | 502; retryUrl?: string };

export type LinkOutcome =
  | { kind: 'linked'; integration: GithubIntegration; account: InstallationAccount; target: LinkTarget }
  | { kind: 'refused'; message: string; status: 400 | 409 };

export type InstallationLinksDeps = {
  api: GithubApi;
  store: GithubStore;
  workspaces: Pick<Store, 'getWorkspace'>;
  clock: Clock;
  log: Logger;
  signingKey: Buffer;
  /** The setup URL as GitHub reaches it (`PUBLIC_URL/v1/integrations/github/setup`): the OAuth `redirect_uri`. */
  setupUrl: () => string;
};

/**
 * Linking an installation proves who owns it, from every way in (contract §12, §19).
 *
 * GitHub's redirect to the setup URL names an installation, with or without the install URL's
 * `state` (GitHub's own Install button has none) and with or without a `code` (GitHub sends one
 * only on the first "Install & Authorize"). Without a `code` the browser is sent through
 * `GITHUB_URL/login/oauth/authorize` with a new single-use state, which comes back with one. The
 * code proves who is at the browser: the installation is linked only if `GET /user/installations`
 * lists it for them. Then a page names the workspace and the account and links only when the
 * installer confirms there, with a token only that page carried: a forwarded install link shows
 * its recipient whose workspace it is for, and its sender cannot confirm for them. Without an
 * install URL's state, the page asks for an API key of the workspace to link to. States are used
 * up in the transaction that stores the link, so a GitHub error on the way leaves them usable.
 */
export class InstallationLinks {
  readonly #deps: InstallationLinksDeps;

  constructor(deps: InstallationLinksDeps) {
    this.#deps = deps;
  }

  /** `POST /v1/integrations/github/install-url`: the App's install page with a fresh state. */
  async installUrl(tenantId: string, name: string | null): Promise<{ url: string; state: string; expires_at: string }> {
    const { api, store, clock } = this.#deps;
    const app = api.app;
    if (!app.slug || !app.client) {
      throw new BadRequest('This server cannot prove GitHub installations: set GITHUB_APP_SLUG, GITHUB_APP_CLIENT_ID and GITHUB_APP_CLIENT_SECRET.');
    }
    const id = randomBytes(18).toString('base64url');
    const now = clock.now();
    const expiresAt = this.#expiry();
    await store.createSetupState({ id, tenant_id: tenantId, name, expires_at: expiresAt, created_at: now });
    const state = this.#signed('setup', id);
    return { url: `${installPageUrl(app)}?state=${encodeURIComponent(state)}`, state, expires_at: expiresAt };
  }

  /** `GET /v1/integrations/github/setup`: where GitHub sends the installer's browser back (from the install page or from authorization). */
  async complete(query: SetupQuery): Promise<SetupOutcome> {
    const { store, clock } = this.#deps;
    // Waiting for an owner's approval: nothing to link, nothing used up (the owner's approval comes back here).
    if (query.setup_action === 'request') return { kind: 'requested' };
    let setupState: SetupState | null = null;
    if (query.state) {
      const attemptId = this.#verified('attempt', query.state);
      if (attemptId) {
        // Back from GitHub's authorization with the installer's code.
        const attempt = await store.linkAttempt(attemptId);
        if (!attempt) return refused('This link was already used. Start again from the install URL.');
        if (this.#expired(attempt.expires_at)) return refused('This link expired (it lasts 15 minutes). Start again from the install URL.');
        if (!query.code) return refused('GitHub sent no authorization code back: the authorization was cancelled. Start again from the install URL.');
        return this.#prove(attempt, query.code);
      }
      const setupId = this.#verified('setup', query.state);
      // The signature first: junk never reaches the database.
      if (!setupId) return refused('This link is not one this server made (unknown state). Start again from the install URL.');
      setupState = await store.setupState(setupId);
      if (!setupState) return refused('This link was already used. Start again from the install URL.');
      if (this.#expired(setupState.expires_at)) return refused('This link expired (it lasts 15 minutes). Start again from the install URL.');
    }
    const installationId = Number(query.installation_id);
    if (!Number.isSafeInteger(installationId) || installationId <= 0) return refused('GitHub sent no installation_id.');
    const attempt: LinkAttempt = {
      id: randomBytes(18).toString('base64url'),
      setup_state_id: setupState?.id ?? null,
      installation_id: installationId,
      account: null,
      confirm_hash: null,
      expires_at: this.#expiry(),
      created_at: clock.now(),
    };
    await store.createLinkAttempt(attempt);
    if (query.code) return this.#prove(attempt, query.code);
    return { kind: 'authorize', url: this.#authorizeUrl(attempt.id) };
  }

  /**
   * `POST /console/github/link`: the installer confirmed on the page `complete` answered.
   * `keyWorkspaceId`: the workspace of the API key the page asked for, when the way in had no
   * install URL's state to name one.
   */
  async confirm(form: { attempt?: string; confirm?: string }, keyWorkspaceId: string | null): Promise<LinkOutcome> {
    const { store, clock, log } = this.#deps;
    const attemptId = form.attempt ? this.#verified('attempt', form.attempt) : null;
    if (!attemptId) return { kind: 'refused', status: 400, message: 'This confirmation is not one this server made. Start again from the install URL.' };
    const attempt = await store.linkAttempt(attemptId);
    const refusedLink = (message: string, status: 400 | 409 = 400): LinkOutcome => ({ kind: 'refused', status, message });
    if (!attempt) return refusedLink('This link was already used. Start again from the install URL.');
    if (this.#expired(attempt.expires_at)) return refusedLink('This link expired (it lasts 15 minutes). Start again from the install URL.');
    if (!attempt.account || !attempt.confirm_hash || !form.confirm || !sameText(attempt.confirm_hash, hashOf(form.confirm)))
      return refusedLink('Only the browser that proved the installation on GitHub can confirm this link: nothing was linked.');
    let target: LinkTarget | null;
    if (attempt.setup_state_id) {
      const state = await store.setupState(attempt.setup_state_id);
      if (!state) return refusedLink('This link was already used. Start again from the install URL.');
      target = await this.#targetOf(state);
    } else {
      if (!keyWorkspaceId) return refusedLink('Give an API key of the workspace to link this installation to.');
      target = await this.#targetOf({ tenant_id: keyWorkspaceId, name: null });
    }
    if (!target) return refusedLink('The workspace of this link no longer exists.');
    const account = attempt.account;
    const now = clock.now();
    let linked: Awaited<ReturnType<GithubStore['linkInstallation']>>;
    try {
      linked = await store.linkInstallation(
        {
          id: crypto.randomUUID(),
          tenant_id: target.workspace_id,
          installation_id: attempt.installation_id,
          name: target.integration_name ?? account.login,
          suspended: false,
          created_at: now,
        },
        account,
        now,
        { attemptId: attempt.id, setupStateId: attempt.setup_state_id },
      );
    } catch (error) {
      if (error instanceof Conflict) return refusedLink(error.message, 409);
      throw error;
    }
    log.info('github: installation linked', {
      tenant_id: target.workspace_id,
      installation_id: attempt.installation_id,
      account: account.login,
      integration_id: linked.id,
    });
    return { kind: 'linked', integration: { id: linked.id, installation_id: linked.installation_id, name: linked.name }, account, target };
  }

  /** Proves with the installer's `code` that they can see the installation; answers the confirmation to show. */
  async #prove(attempt: LinkAttempt, code: string): Promise<SetupOutcome> {
    const { api, store, log } = this.#deps;
    const installationId = attempt.installation_id;
    // Without a code: the same installation again, through GitHub's authorization.
    const retryUrl = `${this.#deps.setupUrl()}?${new URLSearchParams({
      installation_id: String(installationId),
      ...(attempt.setup_state_id ? { state: this.#signed('setup', attempt.setup_state_id) } : {}),
    })}`;
    try {
      const exchanged = await api.exchangeCode(code);
      if ('error' in exchanged) return refused(`GitHub did not authorize the installer (${exchanged.error}).`, 400, retryUrl);
      if (!(await this.#userSees(exchanged.token, installationId))) {
        log.warn('github: an installation the installer cannot see was refused', { installation_id: installationId });
        return refused(`Installation ${installationId} is not one of yours on GitHub: nothing was linked.`);
      }
      const installation = await api.request<{ account: { login: string; id: number; type: string } | null }>({
        method: 'GET',
        path: `/app/installations/${installationId}`,
        auth: { kind: 'app' },
      });
      if (!installation.account) return refused(`GitHub reports no account for installation ${installationId}.`);
      const account = { login: installation.account.login, id: installation.account.id, type: installation.account.type };
      const confirm = randomBytes(24).toString('base64url');
      await store.proveLinkAttempt(attempt.id, account, hashOf(confirm));
      const state = attempt.setup_state_id ? await store.setupState(attempt.setup_state_id) : null;
      if (attempt.setup_state_id && !state) return refused('This link was already used. Start again from the install URL.');
      const target = state ? await this.#targetOf(state) : null;
      if (state && !target) return refused('The workspace of this link no longer exists.');
      return { kind: 'confirm', attempt: this.#signed('attempt', attempt.id), confirm, installationId, account, target };
    } catch (error) {
      if (error instanceof GithubApiError)
        return refused(`GitHub could not confirm the installation (${error.message}).`, error.status >= 500 ? 502 : 400, retryUrl);
      if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'TypeError'))
        return refused(`GitHub could not be reached (${error.message}).`, 502, retryUrl);
      if (error instanceof DomainError) return refused(error.message);
      throw error;
    }
  }

  async #targetOf(state: Pick<SetupState, 'tenant_id' | 'name'>): Promise<LinkTarget | null> {
    const workspace = await this.#deps.workspaces.getWorkspace(state.tenant_id);
    return workspace ? { workspace_id: workspace.id, workspace_name: workspace.name, integration_name: state.name } : null;
  }

  #authorizeUrl(attemptId: string): string {
    const app = this.#deps.api.app;
    const query = new URLSearchParams({ client_id: app.client?.id ?? '', redirect_uri: this.#deps.setupUrl(), state: this.#signed('attempt', attemptId) });
    return `${app.webUrl}/login/oauth/authorize?${query}`;
  }

  async #userSees(userToken: string, installationId: number): Promise<boolean> {
    for (let page = 1; page <= MAX_INSTALLATION_PAGES; page++) {
      const answer = await this.#deps.api.request<{ total_count: number; installations: Array<{ id: number }> }>({
        method: 'GET',
        path: `/user/installations?per_page=100&page=${page}`,
        auth: { kind: 'token', token: userToken },
      });
      if (answer.installations.some((i) => i.id === installationId)) return true;
      if (answer.installations.length < 100) return false;
    }
    return false;
  }

  #expiry(): string {
    return new Date(Date.parse(this.#deps.clock.now()) + STATE_TTL_MS).toISOString();
  }

  #expired(expiresAt: string): boolean {
    return Date.parse(expiresAt) <= Date.parse(this.#deps.clock.now());
  }

  /** `<id>.<HMAC>`: an install URL's state and an attempt's are signed for their purpose, so one never passes for the other. */
  #signed(purpose: 'setup' | 'attempt', id: string): string {
    return `${id}.${this.#signature(purpose, id)}`;
  }

  #verified(purpose: 'setup' | 'attempt', value: string): string | null {
    const [id, signature, extra] = value.split('.');
    if (!id || !signature || extra !== undefined) return null;
    return sameText(this.#signature(purpose, id), signature) ? id : null;
  }

  #signature(purpose: 'setup' | 'attempt', id: string): string {
    return createHmac('sha256', this.#deps.signingKey).update(`github-${purpose}:${id}`).digest('base64url');
  }
}

function refused(message: string, status: 400 | 409 | 502 = 400, retryUrl?: string): SetupOutcome {
  return { kind: 'refused', message, status, ...(retryUrl ? { retryUrl } : {}) };
}

function hashOf(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}
