import { SqlStore } from './sql-store.ts';

export type InstallationRepo = { repo_id: number; name: string; owner: string; url: string; default_branch: string | null };

/** The repositories GitHub reported as granted to each App installation. */
export interface InstallationRepoStore {
  /** Adds or refreshes repositories; `replaceAll` first forgets every other repository of the installation. */
  upsertRepos(installationId: number, repos: InstallationRepo[], now: string, replaceAll: boolean): Promise<void>;
  removeRepos(installationId: number, repoIds: number[]): Promise<void>;
  listRepos(installationId: number): Promise<InstallationRepo[]>;
}

/** The repositories GitHub reported per installation, on either database. */
export class SqlInstallationRepoStore extends SqlStore implements InstallationRepoStore {
  async upsertRepos(installationId: number, repos: InstallationRepo[], now: string, replaceAll: boolean): Promise<void> {
    await this.sql.tx(async (tx) => {
      if (replaceAll) await tx.run('DELETE FROM github_installation_repos WHERE installation_id = ?', [installationId]);
      for (const repo of repos) {
        await tx.run(
          `INSERT INTO github_installation_repos (installation_id, repo_id, name, owner, url, default_branch, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)
           ON CONFLICT (installation_id, repo_id) DO UPDATE SET name = excluded.name, owner = excluded.owner, url = excluded.url,
             default_branch = coalesce(excluded.default_branch, github_installation_repos.default_branch), updated_at = excluded.updated_at`,
          [installationId, repo.repo_id, repo.name, repo.owner, repo.url, repo.default_branch, now],
        );
      }
    });
  }

  async removeRepos(installationId: number, repoIds: number[]): Promise<void> {
    await this.sql.run(`DELETE FROM github_installation_repos WHERE installation_id = ? AND ${this.sql.dialect.inList('repo_id', '?', 'bigint')}`, [
      installationId,
      this.sql.dialect.list(repoIds),
    ]);
  }

  async listRepos(installationId: number): Promise<InstallationRepo[]> {
    // Byte order, as SQLite sorts text, whatever the database's locale.
    return this.sql.rows<InstallationRepo>(
      `SELECT repo_id, name, owner, url, default_branch FROM github_installation_repos WHERE installation_id = ? ORDER BY owner${this.sql.dialect.byteOrder}, name${this.sql.dialect.byteOrder}`,
      [installationId],
    );
  }
}
