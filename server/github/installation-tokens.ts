import type { GithubRepository } from '../../shared/repo-url.ts';
import { TokenRefused } from '../domain/repository-access.ts';
import { type GithubApi, GithubApiError } from './github-api.ts';
import { isRateLimited } from './rate-limits.ts';

/** A token is handed out only while it has at least this long to live: a clone started with it finishes. */
const REUSE_MARGIN_MS = 5 * 60_000;

type Minted = { token: string; expiresAtMs: number };

/** The sentence a user reads for a refused mint: which of GitHub's reasons, and where to fix it. */
function refusalOf(error: GithubApiError, installationId: number, repository: GithubRepository, permissions: Record<string, string>): TokenRefused {
  const full = `${repository.owner}/${repository.name}`;
  const where = `on GitHub: Settings → Applications → Installed GitHub Apps → Configure (installation ${installationId})`;
  if (error.status === 404)
    return new TokenRefused(`The GitHub App's installation ${installationId} no longer exists (uninstalled): install the App again and link it.`, 404);
  if (error.status === 401) return new TokenRefused("GitHub did not accept the App's credentials: check GITHUB_APP_ID and the App's private key.", 401);
  if (error.status === 403 && /suspend/i.test(error.message))
    return new TokenRefused(`The GitHub App's installation ${installationId} is suspended: unsuspend it ${where}.`, 403);
  if (/permission/i.test(error.message)) {
    const asked = Object.entries(permissions)
      .map(([name, level]) => `${name}: ${level}`)
      .join(', ');
    return new TokenRefused(
      `The GitHub App's installation ${installationId} has not granted the permissions needed (${asked}): an owner accepts the App's new permissions ${where}.`,
      error.status,
    );
  }
  if (error.status === 422)
    return new TokenRefused(
      `The repository ${full} is not among the repositories selected in the GitHub App's installation ${installationId}: add it under "Repository access" ${where}.`,
      422,
    );
  return new TokenRefused(`GitHub refused a token for ${full} through installation ${installationId} (${error.message}).`, error.status);
}

/**
 * Installation tokens narrowed to one repository with `contents: read`
 * (`POST /app/installations/{id}/access_tokens`), reused until 5 minutes before they expire.
 * The first mint names the repository; GitHub's answer gives its id, and later mints narrow by
 * `repository_ids`, which a rename does not change. A mint GitHub refuses for good (4xx other than
 * a rate limit) throws `TokenRefused`.
 * They live only in this process's memory: never stored, so never in the database in clear,
 * and a restart simply mints new ones (GitHub tokens last an hour; minting is one call).
 */
export class InstallationTokens {
  readonly #api: GithubApi;
  readonly #now: () => number;
  readonly #cache = new Map<string, Minted>();
  /** Repository ids learned from mints, by installation and `owner/name` (lower case). */
  readonly #repositoryIds = new Map<string, number>();
  /** Mints under way, so that ten claims at once for one repository make one call. */
  readonly #minting = new Map<string, Promise<Minted>>();

  constructor(api: GithubApi, now: () => number = Date.now) {
    this.#api = api;
    this.#now = now;
  }

  /**
   * A token for `repository` alone through `installationId`, with `permissions` only: read-only
   * contents by default (what git needs), deployments and statuses for the status sender.
   */
  async forRepository(
    installationId: number,
    repository: GithubRepository,
    permissions: Record<string, 'read' | 'write'> = { contents: 'read' },
  ): Promise<string> {
    const key = `${installationId}\n${repository.owner.toLowerCase()}/${repository.name.toLowerCase()}\n${JSON.stringify(permissions)}`;
    const cached = this.#cache.get(key);
    if (cached && cached.expiresAtMs - REUSE_MARGIN_MS > this.#now()) return cached.token;
    let minting = this.#minting.get(key);
    if (!minting) {
      minting = this.#mint(installationId, repository, permissions).finally(() => this.#minting.delete(key));
      this.#minting.set(key, minting);
    }
    const minted = await minting;
    this.#cache.set(key, minted);
    this.#sweep();
    return minted.token;
  }

  /** Forgets a token GitHub refused (revoked, or the installation changed): the next call mints anew. */
  forget(installationId: number, repository: GithubRepository, permissions: Record<string, 'read' | 'write'>): void {
    this.#cache.delete(`${installationId}\n${repository.owner.toLowerCase()}/${repository.name.toLowerCase()}\n${JSON.stringify(permissions)}`);
  }

  async #mint(installationId: number, repository: GithubRepository, permissions: Record<string, 'read' | 'write'>): Promise<Minted> {
    const named = `${installationId}\n${repository.owner.toLowerCase()}/${repository.name.toLowerCase()}`;
    const id = this.#repositoryIds.get(named);
    let answer: { token: string; expires_at: string; repositories?: Array<{ id: number; full_name: string }> };
    try {
      answer = await this.#api.request({
        method: 'POST',
        path: `/app/installations/${installationId}/access_tokens`,
        auth: { kind: 'app' },
        body: { ...(id === undefined ? { repositories: [repository.name] } : { repository_ids: [id] }), permissions },
      });
    } catch (error) {
      if (error instanceof GithubApiError && error.status >= 400 && error.status < 500 && !isRateLimited(error)) {
        // An id learned earlier may name a repository since deleted and re-created: named again next time.
        this.#repositoryIds.delete(named);
        throw refusalOf(error, installationId, repository, permissions);
      }
      throw error;
    }
    const learned = answer.repositories?.find((r) => r.full_name.toLowerCase() === `${repository.owner}/${repository.name}`.toLowerCase());
    if (learned) this.#repositoryIds.set(named, learned.id);
    return { token: answer.token, expiresAtMs: Date.parse(answer.expires_at) };
  }

  /** Drops tokens past their reuse: the cache holds at most the repositories built within the hour. */
  #sweep(): void {
    const now = this.#now();
    for (const [key, minted] of this.#cache) if (minted.expiresAtMs - REUSE_MARGIN_MS <= now) this.#cache.delete(key);
  }
}
