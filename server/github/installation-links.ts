import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { GithubIntegration } from '../../shared/schemas/integration.ts';
import type { Clock } from '../domain/clock.ts';
import { BadRequest } from '../domain/errors.ts';
import type { Logger } from '../logger.ts';
import type { GithubStore, InstallationAccount } from '../store/github.ts';
import { type GithubApi, GithubApiError } from './github-api.ts';

/** How long an install URL's `state` stays usable. */
const STATE_TTL_MS = 15 * 60_000;
/** Pages of `/user/installations` read at most (100 each): a user in more installations than this is not served. */
const MAX_INSTALLATION_PAGES = 10;

/** What the setup URL received: GitHub's query parameters, any of which a forger may change. */
export type SetupQuery = { installation_id?: string; setup_action?: string; state?: string; code?: string };

export type SetupOutcome =
  | { kind: 'linked'; integration: GithubIntegration; account: InstallationAccount }
  /** The installer asked an organization owner to approve: nothing to link until they do (and install again). */
  | { kind: 'requested' }
  | { kind: 'refused'; message: string; status: 400 | 502 };

/**
 * Linking an installation proves who owns it (contract §12). The install URL carries a signed,
 * single-use, 15-minute `state` bound to the workspace; the setup URL links the installation only
 * when the `code` GitHub sent with it belongs to a user who can see that installation
 * (`GET /user/installations`), and records the account from `GET /app/installations/{id}` (App
 * JWT). A spoofed `installation_id`, a replayed or expired `state` link nothing.
 */
export class InstallationLinks {
  readonly #deps: { api: GithubApi; store: GithubStore; clock: Clock; log: Logger; signingKey: Buffer };

  constructor(deps: { api: GithubApi; store: GithubStore; clock: Clock; log: Logger; signingKey: Buffer }) {
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
    const expiresAt = new Date(Date.parse(now) + STATE_TTL_MS).toISOString();
    await store.createSetupState({ id, tenant_id: tenantId, name, expires_at: expiresAt, created_at: now });
    const state = `${id}.${this.#sign(id)}`;
    return { url: `${app.webUrl}/apps/${app.slug}/installations/new?state=${encodeURIComponent(state)}`, state, expires_at: expiresAt };
  }

  /** `GET /v1/integrations/github/setup`: where GitHub sends the installer's browser back. */
  async complete(query: SetupQuery): Promise<SetupOutcome> {
    const { api, store, clock, log } = this.#deps;
    const refused = (message: string, status: 400 | 502 = 400): SetupOutcome => ({ kind: 'refused', message, status });
    const [id, signature] = (query.state ?? '').split('.');
    // The signature first: junk never reaches the database, and a forged state cannot burn a real one.
    if (!id || !signature || !this.#verify(id, signature))
      return refused('This link is not one this server made (unknown state). Start again from the install URL.');
    const state = await store.takeSetupState(id);
    if (!state) return refused('This link was already used. Start again from the install URL.');
    if (Date.parse(state.expires_at) <= Date.parse(clock.now())) return refused('This link expired (it lasts 15 minutes). Start again from the install URL.');
    if (query.setup_action === 'request') return { kind: 'requested' };
    const installationId = Number(query.installation_id);
    if (!Number.isSafeInteger(installationId) || installationId <= 0) return refused('GitHub sent no installation_id.');
    if (!query.code)
      return refused('GitHub sent no authorization code: enable "Request user authorization (OAuth) during installation" in the App\'s settings.');
    try {
      const exchanged = await api.exchangeCode(query.code);
      if ('error' in exchanged) return refused(`GitHub did not authorize the installer (${exchanged.error}).`);
      if (!(await this.#userSees(exchanged.token, installationId))) {
        log.warn('github: an installation the installer cannot see was refused', { tenant_id: state.tenant_id, installation_id: installationId });
        return refused(`Installation ${installationId} is not one of yours on GitHub: nothing was linked.`);
      }
      const installation = await api.request<{ account: { login: string; id: number; type: string } | null }>({
        method: 'GET',
        path: `/app/installations/${installationId}`,
        auth: { kind: 'app' },
      });
      if (!installation.account) return refused(`GitHub reports no account for installation ${installationId}.`);
      const account = { login: installation.account.login, id: installation.account.id, type: installation.account.type };
      const now = clock.now();
      const linked = await store.linkInstallation(
        {
          id: crypto.randomUUID(),
          tenant_id: state.tenant_id,
          installation_id: installationId,
          name: state.name ?? account.login,
          suspended: false,
          created_at: now,
        },
        account,
        now,
      );
      log.info('github: installation linked', {
        tenant_id: state.tenant_id,
        installation_id: installationId,
        account: account.login,
        integration_id: linked.id,
      });
      return { kind: 'linked', integration: { id: linked.id, installation_id: linked.installation_id, name: linked.name }, account };
    } catch (error) {
      if (error instanceof GithubApiError) return refused(`GitHub could not confirm the installation (${error.message}).`, error.status >= 500 ? 502 : 400);
      if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'TypeError'))
        return refused(`GitHub could not be reached (${error.message}).`, 502);
      throw error;
    }
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

  #sign(id: string): string {
    return createHmac('sha256', this.#deps.signingKey).update(`github-setup:${id}`).digest('base64url');
  }

  #verify(id: string, signature: string): boolean {
    const expected = Buffer.from(this.#sign(id));
    const given = Buffer.from(signature);
    return expected.length === given.length && timingSafeEqual(expected, given);
  }
}
