import type Database from 'better-sqlite3';

export type InstallationRepo = { repo_id: number; name: string; owner: string; url: string; default_branch: string | null };

/** The repositories GitHub reported as granted to each App installation. */
export interface InstallationRepoStore {
  /** Adds or refreshes repositories; `replaceAll` first forgets every other repository of the installation. */
  upsertRepos(installationId: number, repos: InstallationRepo[], now: string, replaceAll: boolean): Promise<void>;
  removeRepos(installationId: number, repoIds: number[]): Promise<void>;
  listRepos(installationId: number): Promise<InstallationRepo[]>;
}

export class SqliteInstallationRepoStore implements InstallationRepoStore {
  readonly #db: Database.Database;

  constructor(db: Database.Database) {
    this.#db = db;
  }

  async upsertRepos(installationId: number, repos: InstallationRepo[], now: string, replaceAll: boolean): Promise<void> {
    this.#db.transaction(() => {
      if (replaceAll) this.#db.prepare('DELETE FROM github_installation_repos WHERE installation_id = ?').run(installationId);
      const upsert = this.#db.prepare(
        `INSERT INTO github_installation_repos (installation_id, repo_id, name, owner, url, default_branch, updated_at)
         VALUES (@installation_id, @repo_id, @name, @owner, @url, @default_branch, @now)
         ON CONFLICT (installation_id, repo_id) DO UPDATE SET name = excluded.name, owner = excluded.owner, url = excluded.url,
           default_branch = coalesce(excluded.default_branch, github_installation_repos.default_branch), updated_at = excluded.updated_at`,
      );
      for (const repo of repos) upsert.run({ installation_id: installationId, now, ...repo });
    })();
  }

  async removeRepos(installationId: number, repoIds: number[]): Promise<void> {
    this.#db.prepare('DELETE FROM github_installation_repos WHERE installation_id = ? AND repo_id IN (SELECT value FROM json_each(?))').run(installationId, JSON.stringify(repoIds));
  }

  async listRepos(installationId: number): Promise<InstallationRepo[]> {
    return this.#db
      .prepare('SELECT repo_id, name, owner, url, default_branch FROM github_installation_repos WHERE installation_id = ? ORDER BY owner, name')
      .all(installationId) as InstallationRepo[];
  }
}
