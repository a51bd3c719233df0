import { createHmac, randomBytes } from 'node:crypto';
import type { Config } from '../config.ts';
import { sameText } from '../crypto/same-text.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { WEBHOOK_PATH } from '../domain/webhooks/intake.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import type { GithubStore } from '../store/github.ts';
import { GithubApiError, restCall } from './github-api.ts';

/** GitHub's manifest `code` lasts an hour; the page's state lasts as long. */
const STATE_TTL_MS = 60 * 60_000;

export const NEW_APP_PATH = '/console/github/new-app';
export const APP_CREATED_PATH = '/console/github/app-created';
/** The setup URL (kept here too: the manifest names it before any App exists). */
const SETUP_PATH = '/v1/integrations/github/setup';

/** The App settings a manifest makes, as the configuration names them. */
export type StoredAppSettings = Required<
  Pick<Config, 'GITHUB_APP_ID' | 'GITHUB_APP_PRIVATE_KEY' | 'GITHUB_APP_SLUG' | 'GITHUB_APP_CLIENT_ID' | 'GITHUB_APP_CLIENT_SECRET'>
> & { GITHUB_WEBHOOK_SECRET: string | undefined };

type Sealed = { pem: string; client_id: string; client_secret: string; webhook_secret: string | null };

export type ManifestFlowDeps = {
  store: GithubStore;
  secretBox: SecretBox;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'GITHUB_URL' | 'GITHUB_API_URL'>;
  publicUrl: () => string;
};

export type AppCreated = { kind: 'created'; slug: string; appId: string; installUrl: string } | { kind: 'refused'; status: 400 | 502; message: string };

/**
 * Creating the GitHub App from its manifest (contract §19, GitHub's "Registering a GitHub App from
 * a manifest"): a page posts the manifest to GitHub with a single-use state; GitHub sends the
 * browser back with a `code`, which `POST /app-manifests/{code}/conversions` turns into the App's
 * id, slug, private key, OAuth client and the webhook secret GitHub generated. They are stored
 * sealed with the encryption key and used from the next start; App settings in the environment
 * still win (`withStoredGithubApp`).
 */
export class ManifestFlow {
  readonly #deps: ManifestFlowDeps;
  readonly #signingKey: Buffer;

  constructor(deps: ManifestFlowDeps) {
    this.#deps = deps;
    this.#signingKey = deps.secretBox.deriveKey('github-manifest-state');
  }

  /** The manifest: every URL points at this control plane; the setup URL is honoured because GitHub's own OAuth-on-install is off (the setup route asks). */
  manifest(name: string | null): Record<string, unknown> {
    const base = this.#deps.publicUrl();
    return {
      name: name ?? 'Agent control plane',
      url: base,
      description: 'Builds and deploys agent servers from your repositories and reports each deployment back to GitHub.',
      public: false,
      hook_attributes: { url: `${base}${WEBHOOK_PATH}`, active: true },
      redirect_url: `${base}${APP_CREATED_PATH}`,
      callback_urls: [`${base}${SETUP_PATH}`],
      setup_url: `${base}${SETUP_PATH}`,
      setup_on_update: true,
      request_oauth_on_install: false,
      default_permissions: { contents: 'read', metadata: 'read', deployments: 'write', statuses: 'write', checks: 'write', pull_requests: 'read' },
      default_events: ['push', 'pull_request', 'check_run'],
    };
  }

  /** A fresh state for `organizationId`, and where the manifest is posted (an organization's page when one is named). */
  async start(organizationId: string, githubOrganization: string | null): Promise<{ action: string; state: string }> {
    const { store, clock } = this.#deps;
    const id = randomBytes(18).toString('base64url');
    const now = clock.now();
    await store.createManifestState({
      id,
      organization_id: organizationId,
      expires_at: new Date(Date.parse(now) + STATE_TTL_MS).toISOString(),
      created_at: now,
    });
    const state = `${id}.${this.#sign(id)}`;
    const page = githubOrganization ? `/organizations/${encodeURIComponent(githubOrganization)}/settings/apps/new` : '/settings/apps/new';
    return { action: `${this.#deps.config.GITHUB_URL}${page}?state=${encodeURIComponent(state)}`, state };
  }

  /** GitHub's redirect after the App was made: converts the code and stores the App. */
  async complete(query: { code?: string; state?: string }): Promise<AppCreated> {
    const { store, secretBox, clock, log, config } = this.#deps;
    const refused = (message: string, status: 400 | 502 = 400): AppCreated => ({ kind: 'refused', status, message });
    const [id, signature, extra] = (query.state ?? '').split('.');
    if (!id || !signature || extra !== undefined || !sameText(this.#sign(id), signature))
      return refused('This page is not one this server sent to GitHub (unknown state). Start again from the new-App page.');
    if (!query.code || !/^[A-Za-z0-9_-]{1,100}$/.test(query.code)) return refused('GitHub sent no code back.');
    const state = await store.takeManifestState(id);
    if (!state) return refused('This page was already used. Start again from the new-App page.');
    if (Date.parse(state.expires_at) <= Date.parse(clock.now())) return refused('This page expired (it lasts an hour). Start again from the new-App page.');
    let app: { id: number; slug?: string; html_url: string; pem: string; client_id: string; client_secret: string; webhook_secret: string | null };
    try {
      app = await restCall(config.GITHUB_API_URL, { method: 'POST', path: `/app-manifests/${query.code}/conversions` }, 'agent-control-plane/manifest');
    } catch (error) {
      const message = error instanceof GithubApiError || error instanceof Error ? error.message : String(error);
      return refused(
        `GitHub did not hand over the App (${message}). Start again from the new-App page.`,
        error instanceof GithubApiError && error.status < 500 ? 400 : 502,
      );
    }
    const slug = app.slug ?? new URL(app.html_url).pathname.split('/').filter(Boolean).pop() ?? '';
    const sealed: Sealed = { pem: app.pem, client_id: app.client_id, client_secret: app.client_secret, webhook_secret: app.webhook_secret };
    await store.saveAppRegistration({ app_id: String(app.id), slug, sealed: secretBox.encryptJson(sealed), created_at: clock.now() });
    log.info('github: a GitHub App was created from the manifest; it is used from the next start', {
      app_id: app.id,
      slug,
      organization_id: state.organization_id,
    });
    return { kind: 'created', slug, appId: String(app.id), installUrl: app.html_url };
  }

  #sign(id: string): string {
    return createHmac('sha256', this.#signingKey).update(`github-manifest:${id}`).digest('base64url');
  }
}

/**
 * The configuration with the App made from the manifest, when the environment names no App of its
 * own (`GITHUB_APP_ID` unset): settings given in the environment always win, and one App's settings
 * are never mixed with another's. The webhook secret likewise, unless `GITHUB_WEBHOOK_SECRET` is set.
 */
export async function withStoredGithubApp<C extends Partial<StoredAppSettings>>(
  config: C,
  store: Pick<GithubStore, 'appRegistration'>,
  secretBox: SecretBox,
  log: Logger,
): Promise<C> {
  if (config.GITHUB_APP_ID !== undefined) return config;
  const registration = await store.appRegistration();
  if (!registration) return config;
  const sealed = secretBox.decryptJson<Sealed>(registration.sealed);
  log.info('github: using the GitHub App created from the manifest', { app_id: registration.app_id, slug: registration.slug });
  return {
    ...config,
    GITHUB_APP_ID: registration.app_id,
    GITHUB_APP_PRIVATE_KEY: sealed.pem,
    GITHUB_APP_SLUG: registration.slug,
    GITHUB_APP_CLIENT_ID: sealed.client_id,
    GITHUB_APP_CLIENT_SECRET: sealed.client_secret,
    GITHUB_WEBHOOK_SECRET: config.GITHUB_WEBHOOK_SECRET ?? sealed.webhook_secret ?? undefined,
  };
}
