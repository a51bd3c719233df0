import { SqlAgentStore } from './agents.ts';
import { SqlAuditStore } from './audit.ts';
import type { OpenStoreOptions, StoreBackend } from './backend.ts';
import { SqlClusterReadings } from './cluster-readings.ts';
import { SqlConsoleStore } from './console.ts';
import { LocalCoordination } from './coordination.ts';
import { SqlEventStore } from './events.ts';
import { SqlGithubStore } from './github.ts';
import { SqlGithubTrustStore } from './github-trust.ts';
import { SqlInstallationRepoStore } from './installation-repos.ts';
import { SqlOAuthStore } from './oauth.ts';
import { openSqliteStore, type SqliteStore } from './sqlite.ts';
import { SqlUploadStore } from './uploads.ts';
import { SqlWebhookSecretStore } from './webhook-secrets.ts';
import { SqlWebhookStore } from './webhooks.ts';

/** The SQLite backend: `core` keeps its handle, which only the store files (and SQLite tests) use. */
export type SqliteBackend = StoreBackend & { readonly core: SqliteStore };

/** Opens (and migrates) the SQLite file at `path` and builds every store on its one connection. */
export function openSqliteBackend(path: string, options: OpenStoreOptions): SqliteBackend {
  const core = openSqliteStore({ path, secretBox: options.secretBox, synchronous: options.synchronous, rules: options.rules });
  const sql = core.adapter;
  return {
    core,
    webhooks: new SqlWebhookStore(sql),
    webhookSecrets: new SqlWebhookSecretStore(sql),
    oauth: new SqlOAuthStore(sql, options.rules),
    uploads: new SqlUploadStore(sql),
    installationRepos: new SqlInstallationRepoStore(sql),
    agents: new SqlAgentStore(sql),
    githubTrust: new SqlGithubTrustStore(sql),
    audit: new SqlAuditStore(sql),
    events: new SqlEventStore(sql),
    clusterReadings: new SqlClusterReadings(sql),
    github: new SqlGithubStore(sql, options.rules),
    console: new SqlConsoleStore(sql),
    // One process per SQLite file: the local wake-ups and cache drops already reach everyone.
    coordination: new LocalCoordination(),
    description: path,
    probeWrite: () => core.probeWrite(),
    async close() {
      core.close();
    },
  };
}
