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

  /** A read-only token for `repository` through `installationId`. */
  async forRepository(installationId: number, repository: GithubRepository): Promise<string> {
    const key = `${installationId}\n${repository.owner.toLowerCase()}/${repository.name.toLowerCase()}`;
    const cached = this.#cache.get(key);
    if (cached && cached.expiresAtMs - REUSE_MARGIN_MS > this.#now()) return cached.token;
    let minting = this.#minting.get(key);
    if (!minting) {
      minting = this.#mint(installationId, repository).finally(() => this.#minting.delete(key));
      this.#minting.set(key, minting);
    }
    const minted = await minting;
    this.#cache.set(key, minted);
    this.#sweep();
    return minted.token;
  }

  async #mint(installationId: number, repository: GithubRepository): Promise<Minted> {
    const answer = await this.#api.request<{ token: string; expires_at: string }>({
      method: 'POST',
      path: `/app/installations/${installationId}/access_tokens`,
      auth: { kind: 'app' },
      body: { repositories: [repository.name], permissions: { contents: 'read' } },
    });
    return { token: answer.token, expiresAtMs: Date.parse(answer.expires_at) };
  }

  /** Drops tokens past their reuse: the cache holds at most the repositories built within the hour. */
  #sweep(): void {
    const now = this.#now();
    for (const [key, minted] of this.#cache) if (minted.expiresAtMs - REUSE_MARGIN_MS <= now) this.#cache.delete(key);
  }
}
