import type { Config } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { type GithubAppSettings, githubAppFrom } from '../github/app-settings.ts';
import { countGithubRequests } from '../github/counted-api.ts';
import { GithubApi } from '../github/github-api.ts';
import { GithubPace } from '../github/github-pace.ts';
import { InstallationLinks } from '../github/installation-links.ts';
import { InstallationPermissions } from '../github/installation-permissions.ts';
import { InstallationTokens } from '../github/installation-tokens.ts';
import { RepoAccess } from '../github/repo-access.ts';
import { GithubStatusSender } from '../github/status-sender.ts';
import type { RouteContext } from '../http/env.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import { GITHUB_SETUP_PATH, githubSetupRoutes } from '../routes/github-setup.ts';
import type { GithubStore } from '../store/github.ts';
import type { Store } from '../store/types.ts';
import type { Tracing } from '../tracing.ts';

type GithubAppConfig = GithubAppSettings & Pick<Config, 'GITHUB_WRITES_PER_MINUTE' | 'GITHUB_WRITES_PER_HOUR'>;

/**
 * The GitHub App side of the round trip (contract §12), or null without App settings: the server
 * then works as it did without them (public repositories, no status back) and says so once.
 */
export function createGithubApp(deps: {
  config: GithubAppConfig;
  store: Store;
  github: GithubStore;
  secretBox: SecretBox;
  clock: Clock;
  log: Logger;
  /** The address the statuses' links point at. */
  publicUrl: () => string;
  /** Whether this process sends the status outbox now (one process at a time on one database). */
  leadSender?: () => Promise<boolean>;
  /** Counts the requests to GitHub (`acp_github_requests_total`). */
  metrics?: Pick<Metrics, 'githubRequest'>;
  /** A client span per request to GitHub, when tracing is on. */
  tracing?: Tracing;
}) {
  const app = githubAppFrom(deps.config);
  if (!app) {
    deps.log.info('github: no GitHub App configured (GITHUB_APP_ID): public repositories only, no status back to GitHub, installations linked by id');
    return null;
  }
  const now = () => Date.parse(deps.clock.now());
  const api = deps.metrics ? countGithubRequests(new GithubApi(app, now), deps.metrics, deps.tracing) : new GithubApi(app, now);
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
  return {
    app,
    api,
    tokens,
    repoAccess,
    /** Sends revision changes to GitHub as deployments and commit statuses. */
    sender,
    routes: (ctx: RouteContext) => githubSetupRoutes(ctx, links),
  };
}
