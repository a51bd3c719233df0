import type { GithubRepository } from './app-settings.ts';
import type { GithubApi } from './github-api.ts';

/** A token is handed out only while it has at least this long to live: a clone started with it finishes. */
const REUSE_MARGIN_MS = 5 * 60_000;

type Minted = { token: string; expiresAtMs: number };

/**
 * Installation tokens narrowed to one repository with `contents: read`
 * (`POST /app/installations/{id}/access_tokens`), reused until 5 minutes before they expire.
 * They live only in this process's memory: never stored, so never in the database in clear,
 * and a restart simply mints new ones (GitHub tokens last an hour; minting is one call).
 */
export class InstallationTokens {
  readonly #api: GithubApi;
  readonly #now: () => number;
  readonly #cache = new Map<string, Minted>();
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
    const answer = await this.#api.request<{ token: string; expires_at: string }>({
      method: 'POST',
      path: `/app/installations/${installationId}/access_tokens`,
      auth: { kind: 'app' },
      body: { repositories: [repository.name], permissions },
    });
    return { token: answer.token, expiresAtMs: Date.parse(answer.expires_at) };
  }

  /** Drops tokens past their reuse: the cache holds at most the repositories built within the hour. */
  #sweep(): void {
    const now = this.#now();
    for (const [key, minted] of this.#cache) if (minted.expiresAtMs - REUSE_MARGIN_MS <= now) this.#cache.delete(key);
  }
}
