import type { InstallationRepo, InstallationRepoStore } from '../installation-repos.ts';
import type { PgDb } from './db.ts';

/** The repositories GitHub reported per installation, on PostgreSQL (mirrors `../installation-repos.ts`). */
export class PgInstallationRepoStore implements InstallationRepoStore {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async upsertRepos(installationId: number, repos: InstallationRepo[], now: string, replaceAll: boolean): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      if (replaceAll) await db.run('DELETE FROM github_installation_repos WHERE installation_id = ?', [installationId], c);
      for (const repo of repos) {
        await db.run(
          `INSERT INTO github_installation_repos (installation_id, repo_id, name, owner, url, default_branch, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (installation_id, repo_id) DO UPDATE SET name = excluded.name, owner = excluded.owner, url = excluded.url,
             default_branch = coalesce(excluded.default_branch, github_installation_repos.default_branch), updated_at = excluded.updated_at`,
          [installationId, repo.repo_id, repo.name, repo.owner, repo.url, repo.default_branch, now],
          c,
        );
      }
    });
  }

  async removeRepos(installationId: number, repoIds: number[]): Promise<void> {
    await this.#db.run('DELETE FROM github_installation_repos WHERE installation_id = ? AND repo_id = ANY(?::bigint[])', [installationId, repoIds]);
  }

  async listRepos(installationId: number): Promise<InstallationRepo[]> {
    // Byte order, as SQLite sorts text, whatever the database's locale.
    return this.#db.rows<InstallationRepo>(
      'SELECT repo_id, name, owner, url, default_branch FROM github_installation_repos WHERE installation_id = ? ORDER BY owner COLLATE "C", name COLLATE "C"',
      [installationId],
    );
  }
}
