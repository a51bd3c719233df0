import type { Config } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { type GithubAppSettings, githubAppFrom } from '../github/app-settings.ts';
import { countGithubRequests } from '../github/counted-api.ts';
import { GithubApi } from '../github/github-api.ts';
import { GithubPace } from '../github/github-pace.ts';
import { InstallationLinks } from '../github/installation-links.ts';
import { InstallationPermissions } from '../github/installation-permissions.ts';
import { InstallationTokens } from '../github/installation-tokens.ts';
import { ManifestFlow } from '../github/manifest-flow.ts';
import { RepoAccess } from '../github/repo-access.ts';
import { GithubStatusSender } from '../github/status-sender.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { githubManifestRoutes } from '../routes/github-manifest.ts';
import { GITHUB_SETUP_PATH, githubSetupRoutes } from '../routes/github-setup.ts';
import { integrationRoutes } from '../routes/integrations.ts';
import type { GithubStore } from '../store/github.ts';
import type { Store } from '../store/types.ts';
import type { Tracing } from '../tracing.ts';
import type { Feature } from './feature.ts';

type GithubAppConfig = GithubAppSettings & Pick<Config, 'GITHUB_URL' | 'GITHUB_API_URL' | 'GITHUB_WRITES_PER_MINUTE' | 'GITHUB_WRITES_PER_HOUR'>;

/** What the core tables give the App's side: integrations, the revisions and logs a status tells of, workspaces a link names. */
export type GithubAppStore = Pick<Store, 'getIntegrationById' | 'getRevisionById' | 'getDeploymentById' | 'searchLogs' | 'getWorkspace'>;

/** The GitHub App when configured: what the other features take from it. */
export type ConfiguredGithubApp = {
  /** The App's web host (`GITHUB_URL`). */
  webUrl: string;
  /** Installation tokens for private repositories on the App's host. */
  repoAccess: RepoAccess;
  /** Sends revision changes to GitHub as deployments and commit statuses; tells a refused preview. */
  sender: GithubStatusSender;
};

/**
 * The GitHub App (contract §§12, 19): the installations (integrations) a workspace links, creating the
 * App from its manifest (with or without App settings: it makes them), and with App settings the
 * proven installation links (setup URL) and the status outbox's sender. Without App settings none of
 * the App's side is built: the server works as it did without them (public repositories, no status
 * back) and says so once.
 */
export function githubAppFeature(deps: {
  config: GithubAppConfig;
  store: GithubAppStore;
  github: GithubStore;
  secretBox: SecretBox;
  clock: Clock;
  log: Logger;
  /** The address the statuses' links and the setup URL point at. */
  publicUrl: () => string;
  /** Whether this process sends the status outbox now (one process at a time on one database). */
  leadSender: () => Promise<boolean>;
  /** Counts the requests to GitHub (`acp_github_requests_total`). */
  metrics: Pick<Metrics, 'githubRequest'>;
  /** A client span per request to GitHub, when tracing is on. */
  tracing?: Tracing;
}): Feature & { app: ConfiguredGithubApp | null } {
  const manifestFlow = new ManifestFlow({
    store: deps.github,
    secretBox: deps.secretBox,
    clock: deps.clock,
    log: deps.log,
    config: deps.config,
    publicUrl: deps.publicUrl,
  });
  const configured = configuredApp(deps);
  return {
    name: 'github-app',
    app: configured?.app ?? null,
    routes(ctx) {
      integrationRoutes(ctx);
      if (configured) githubSetupRoutes(ctx, configured.links);
      githubManifestRoutes(ctx, manifestFlow, deps.config.GITHUB_URL);
    },
    workers: configured ? [configured.app.sender] : [],
  };
}

/** The App's side from its settings, or null without them (logged once either way). */
function configuredApp(deps: Parameters<typeof githubAppFeature>[0]): { app: ConfiguredGithubApp; links: InstallationLinks } | null {
  const app = githubAppFrom(deps.config);
  if (!app) {
    deps.log.info('github: no GitHub App configured (GITHUB_APP_ID): public repositories only, no status back to GitHub, installations linked by id');
    return null;
  }
  const now = () => Date.parse(deps.clock.now());
  const api = countGithubRequests(new GithubApi(app, now), deps.metrics, deps.tracing);
  const tokens = new InstallationTokens(api, now);
  const repoAccess = new RepoAccess({
    app,
    store: deps.store,
    tokens,
    proven: async (integration) => (await deps.github.accountOf(integration.id)) !== null,
    log: deps.log,
  });
  const links = new InstallationLinks({
    api,
    store: deps.github,
    clock: deps.clock,
    log: deps.log,
    signingKey: deps.secretBox.deriveKey('github-setup-state'),
    workspaces: deps.store,
    setupUrl: () => `${deps.publicUrl()}${GITHUB_SETUP_PATH}`,
  });
  const sender = new GithubStatusSender({
    app,
    api,
    tokens,
    permissions: new InstallationPermissions(api, now),
    store: deps.store,
    github: deps.github,
    pace: new GithubPace({ perMinute: deps.config.GITHUB_WRITES_PER_MINUTE, perHour: deps.config.GITHUB_WRITES_PER_HOUR }, now),
    clock: deps.clock,
    log: deps.log,
    publicUrl: deps.publicUrl,
    lead: deps.leadSender,
  });
  deps.log.info('github: GitHub App configured', {
    app_id: app.appId,
    github_url: app.webUrl,
    api_url: app.apiUrl,
    proves_installations: app.client !== null && app.slug !== null,
  });
  return { app: { webUrl: app.webUrl, repoAccess, sender }, links };
}
