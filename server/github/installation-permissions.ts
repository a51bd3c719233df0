import type { GithubApi } from './github-api.ts';

/** How long an installation's granted permissions are trusted before they are read again. */
const TRUST_MS = 60 * 60_000;

/**
 * What each installation granted the App (`GET /app/installations/{id}`, App JWT), read at most
 * once an hour per installation: an owner who accepts new permissions (check runs) is noticed
 * within the hour without a call per push.
 */
export class InstallationPermissions {
  readonly #api: GithubApi;
  readonly #now: () => number;
  readonly #granted = new Map<number, { permissions: Record<string, string>; readAtMs: number }>();

  constructor(api: GithubApi, now: () => number = Date.now) {
    this.#api = api;
    this.#now = now;
  }

  /** Whether the installation grants `name: write`. */
  async canWrite(installationId: number, name: string): Promise<boolean> {
    let known = this.#granted.get(installationId);
    if (!known || this.#now() - known.readAtMs > TRUST_MS) {
      const answer = await this.#api.request<{ permissions?: Record<string, string> }>({
        method: 'GET',
        path: `/app/installations/${installationId}`,
        auth: { kind: 'app' },
      });
      known = { permissions: answer.permissions ?? {}, readAtMs: this.#now() };
      this.#granted.set(installationId, known);
    }
    return known.permissions[name] === 'write';
  }

  /** Forgets what is known (a `new_permissions_accepted` delivery, a refused token). */
  forget(installationId: number): void {
    this.#granted.delete(installationId);
  }
}
