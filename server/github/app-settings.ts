import { createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Config } from '../config.ts';
import { StartupError } from '../startup-errors.ts';

/** The settings a GitHub App is made from. */
export type GithubAppSettings = Pick<
  Config,
  | 'GITHUB_APP_ID'
  | 'GITHUB_APP_PRIVATE_KEY'
  | 'GITHUB_APP_PRIVATE_KEY_FILE'
  | 'GITHUB_APP_SLUG'
  | 'GITHUB_APP_CLIENT_ID'
  | 'GITHUB_APP_CLIENT_SECRET'
  | 'GITHUB_URL'
  | 'GITHUB_API_URL'
>;

/** The GitHub App this server acts as (contract §12), read once at start. */
export type GithubApp = {
  appId: string;
  privateKey: KeyObject;
  /** Its install page's name; null: no install URL can be made (linking falls back to nothing). */
  slug: string | null;
  /** The App's OAuth client (user authorization during installation); null: installations cannot be proven. */
  client: { id: string; secret: string } | null;
  /** GitHub's web and git host, without a trailing slash. */
  webUrl: string;
  /** GitHub's REST API, without a trailing slash. */
  apiUrl: string;
};

/**
 * The App settings, or null when none are set (public repositories only, no status back). A key
 * that is not an RSA private key stops the start with a sentence, not at the first build.
 */
export function githubAppFrom(config: GithubAppSettings): GithubApp | null {
  if (config.GITHUB_APP_ID === undefined) return null;
  let pem = config.GITHUB_APP_PRIVATE_KEY;
  if (pem === undefined && config.GITHUB_APP_PRIVATE_KEY_FILE !== undefined) {
    try {
      pem = readFileSync(config.GITHUB_APP_PRIVATE_KEY_FILE, 'utf8');
    } catch (error) {
      throw new StartupError(`GITHUB_APP_PRIVATE_KEY_FILE cannot be read: ${(error as Error).message}`);
    }
  }
  let privateKey: KeyObject;
  try {
    // Environment variables often carry a PEM with literal \n: both forms are accepted.
    privateKey = createPrivateKey(pem!.includes('\\n') ? pem!.replace(/\\n/g, '\n') : pem!);
  } catch {
    throw new StartupError("GITHUB_APP_PRIVATE_KEY is not a PEM private key (download one from the App's settings page).");
  }
  if (privateKey.asymmetricKeyType !== 'rsa') throw new StartupError('GITHUB_APP_PRIVATE_KEY must be an RSA key: GitHub signs App JWTs with RS256.');
  const client =
    config.GITHUB_APP_CLIENT_ID && config.GITHUB_APP_CLIENT_SECRET ? { id: config.GITHUB_APP_CLIENT_ID, secret: config.GITHUB_APP_CLIENT_SECRET } : null;
  return { appId: config.GITHUB_APP_ID, privateKey, slug: config.GITHUB_APP_SLUG ?? null, client, webUrl: config.GITHUB_URL, apiUrl: config.GITHUB_API_URL };
}

/**
 * Whether the App lives on GitHub Enterprise Server: its REST API is `https://<host>/api/v3`
 * (github.com's and GHE.com's are `api.` hosts).
 */
export function isEnterpriseServer(app: Pick<GithubApp, 'apiUrl'>): boolean {
  return /\/api\/v3$/.test(new URL(app.apiUrl).pathname.replace(/\/+$/, ''));
}

/** The App's install page: `/github-apps/<slug>/installations/new` on GitHub Enterprise Server, `/apps/<slug>/…` elsewhere. */
export function installPageUrl(app: Pick<GithubApp, 'apiUrl' | 'webUrl' | 'slug'>): string {
  return `${app.webUrl}/${isEnterpriseServer(app) ? 'github-apps' : 'apps'}/${app.slug}/installations/new`;
}
