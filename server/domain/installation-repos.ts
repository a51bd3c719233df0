import type { GithubRepository } from '../../shared/schemas/integration.ts';
import type { Clock } from '../lib/clock.ts';
import type { InstallationRepo, InstallationRepoStore } from '../store/installation-repos.ts';
import type { IntegrationStore } from '../store/types.ts';
import { NotFound } from './errors.ts';

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

type InstallationReposDeps = {
  store: Pick<IntegrationStore, 'getIntegration'>;
  repos: InstallationRepoStore;
  clock: Clock;
  /** GitHub's web host (`GITHUB_URL`): a repository's page when a delivery names none (GitHub Enterprise Server included). */
  webUrl: string;
};

/**
 * The repositories each GitHub App installation was granted, as GitHub's deliveries report them:
 * `installation` (`created`, `new_permissions_accepted`: the full list; `deleted`: none left),
 * `installation_repositories` (`added` / `removed`), and `push` (the pushed repository, with its
 * default branch). The webhook processor calls `recordFromDelivery` for each delivery it handles.
 */
export class InstallationRepos {
  readonly #deps: InstallationReposDeps;

  constructor(deps: InstallationReposDeps) {
    this.#deps = deps;
  }

  /** `GET /v1/integrations/github/{id}/repos` of an integration of the workspace. */
  async list(tenantId: string, integrationId: string): Promise<GithubRepository[]> {
    const integration = await this.#deps.store.getIntegration(tenantId, integrationId);
    if (!integration) throw new NotFound(`GitHub integration ID ${integrationId} not found.`);
    const repos = await this.#deps.repos.listRepos(integration.installation_id);
    return repos.map((repo) => ({
      host_integration_id: integration.id,
      id: repo.repo_id,
      name: repo.name,
      owner: repo.owner,
      url: repo.url,
      default_branch: repo.default_branch ?? 'main',
    }));
  }

  /** Records what a delivery says about an installation's repositories; anything unreadable is skipped. */
  async recordFromDelivery(event: string, payload: unknown): Promise<void> {
    if (!isObject(payload) || !isObject(payload.installation) || typeof payload.installation.id !== 'number') return;
    const installationId = payload.installation.id;
    const { repos, clock } = this.#deps;
    const now = clock.now();
    const owner = isObject(payload.installation.account) && typeof payload.installation.account.login === 'string' ? payload.installation.account.login : null;
    if (event === 'installation') {
      if (payload.action === 'deleted') return repos.upsertRepos(installationId, [], now, true);
      if (Array.isArray(payload.repositories))
        return repos.upsertRepos(
          installationId,
          payload.repositories.flatMap((r) => listed(r, owner, this.#deps.webUrl)),
          now,
          true,
        );
    } else if (event === 'installation_repositories') {
      if (Array.isArray(payload.repositories_added))
        await repos.upsertRepos(
          installationId,
          payload.repositories_added.flatMap((r) => listed(r, owner, this.#deps.webUrl)),
          now,
          false,
        );
      if (Array.isArray(payload.repositories_removed)) {
        await repos.removeRepos(
          installationId,
          payload.repositories_removed.flatMap((r) => (isObject(r) && typeof r.id === 'number' ? [r.id] : [])),
        );
      }
    } else if (event === 'push' && isObject(payload.repository)) {
      const repo = pushed(payload.repository, this.#deps.webUrl);
      if (repo) await repos.upsertRepos(installationId, [repo], now, false);
    }
  }
}

/** An item of an installation event's repository list: `{id, name, full_name}`. */
function listed(value: unknown, accountLogin: string | null, webUrl: string): InstallationRepo[] {
  if (!isObject(value) || typeof value.id !== 'number' || typeof value.name !== 'string') return [];
  const fullName = typeof value.full_name === 'string' ? value.full_name : accountLogin ? `${accountLogin}/${value.name}` : null;
  if (!fullName) return [];
  const owner = fullName.split('/')[0]!;
  return [{ repo_id: value.id, name: value.name, owner, url: `${webUrl}/${fullName}`, default_branch: null }];
}

/** A push delivery's full repository object. */
function pushed(value: Json, webUrl: string): InstallationRepo | null {
  if (typeof value.id !== 'number' || typeof value.name !== 'string') return null;
  const owner = isObject(value.owner)
    ? typeof value.owner.login === 'string'
      ? value.owner.login
      : typeof value.owner.name === 'string'
        ? value.owner.name
        : null
    : null;
  if (!owner) return null;
  const url = typeof value.html_url === 'string' ? value.html_url : `${webUrl}/${owner}/${value.name}`;
  return { repo_id: value.id, name: value.name, owner, url, default_branch: typeof value.default_branch === 'string' ? value.default_branch : null };
}
