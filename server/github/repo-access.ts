import { cloneUrlOf, repositoryOnHost } from '../../shared/repo-url.ts';
import { Unavailable } from '../domain/errors.ts';
import { type RepoCredentials, type RepositoryAccess, TokenRefused } from '../domain/repository-access.ts';
import type { Logger } from '../logger.ts';
import type { IntegrationRecord, Store } from '../store/types.ts';
import type { GithubApp } from './app-settings.ts';
import type { InstallationTokens } from './installation-tokens.ts';

export type RepoAccessDeps = {
  app: GithubApp;
  store: Pick<Store, 'getIntegrationById'>;
  tokens: InstallationTokens;
  /** Whether the integration's installation was proven to be its workspace's (the setup-URL flow). */
  proven: (integration: IntegrationRecord) => Promise<boolean>;
  log: Logger;
};

/**
 * Decides whether a deployment's repository is read with an installation token: only a repository
 * on the App's GitHub host, through the deployment's own integration, whose installation was
 * proven to belong to the workspace (a bare `installation_id` someone typed opens nothing) and is
 * not suspended. Anything else is read as before, without credentials.
 */
export class RepoAccess implements RepositoryAccess {
  readonly #deps: RepoAccessDeps;

  constructor(deps: RepoAccessDeps) {
    this.#deps = deps;
  }

  /**
   * Credentials for `repoUrl` through `integrationId`, or null when it is read without any (not on
   * the App's host, no proven installation). Once the installation is the way in, there is no
   * anonymous fallback: git's "could not read Username" would hide the reason. A mint GitHub
   * refuses for good throws `TokenRefused` (the message says what to fix on GitHub); one that may
   * pass (5xx, timeout, rate limit) throws `Unavailable`.
   */
  async credentials(repoUrl: string | null, integrationId: string | null, context: Record<string, unknown> = {}): Promise<RepoCredentials | null> {
    const { app, store, tokens, proven, log } = this.#deps;
    if (!repoUrl || !integrationId) return null;
    const repository = repositoryOnHost(repoUrl, app.webUrl);
    if (!repository) return null;
    const integration = await store.getIntegrationById(integrationId);
    if (!integration || integration.suspended || !(await proven(integration))) return null;
    try {
      return { url: cloneUrlOf(repository, app.webUrl, repoUrl), token: await tokens.forRepository(integration.installation_id, repository) };
    } catch (error) {
      const reason = String(error instanceof Error ? error.message : error);
      log.warn('github: could not mint an installation token', {
        ...context,
        installation_id: integration.installation_id,
        repository: `${repository.owner}/${repository.name}`,
        refused_for_good: error instanceof TokenRefused,
        error: reason,
      });
      if (error instanceof TokenRefused) throw error;
      throw new Unavailable(`GitHub could not give a token for ${repository.owner}/${repository.name} now (${reason}).`, { retryAfterSeconds: 10 });
    }
  }
}
