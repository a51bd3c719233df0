import { SqliteAgentStore } from './agents.ts';
import type { OpenStoreOptions, StoreBackend } from './backend.ts';
import { LocalCoordination } from './coordination.ts';
import { SqliteGithubStore } from './github.ts';
import { SqliteInstallationRepoStore } from './installation-repos.ts';
import { SqliteOAuthStore } from './oauth.ts';
import { openSqliteStore, type SqliteStore } from './sqlite.ts';
import { SqliteUploadStore } from './uploads.ts';
import { SqliteWebhookSecretStore } from './webhook-secrets.ts';
import { SqliteWebhookStore } from './webhooks.ts';

/** The SQLite backend: `core` keeps its handle, which only the store files (and SQLite tests) use. */
export type SqliteBackend = StoreBackend & { readonly core: SqliteStore };

/** Opens (and migrates) the SQLite file at `path` and builds every store on its one connection. */
export function openSqliteBackend(path: string, options: OpenStoreOptions): SqliteBackend {
  const core = openSqliteStore({ path, secretBox: options.secretBox, synchronous: options.synchronous });
  const { db } = core;
  return {
    core,
    webhooks: new SqliteWebhookStore(db),
    webhookSecrets: new SqliteWebhookSecretStore(db),
    oauth: new SqliteOAuthStore(db),
    uploads: new SqliteUploadStore(db),
    installationRepos: new SqliteInstallationRepoStore(db),
    agents: new SqliteAgentStore(db),
    github: new SqliteGithubStore(db),
    // One process per SQLite file: the local wake-ups and cache drops already reach everyone.
    coordination: new LocalCoordination(),
    description: path,
    probeWrite: () => core.probeWrite(),
    async close() {
      core.close();
    },
  };
}
