import type { SecretBox } from '../crypto/secret-box.ts';
import type { Logger } from '../logger.ts';
import type { ClusterReadings } from '../metrics.ts';
import type { AgentStore } from './agents.ts';
import type { AuditStore } from './audit.ts';
import type { ConsoleStore } from './console.ts';
import type { Coordination } from './coordination.ts';
import type { EventStore } from './events.ts';
import type { GithubStore } from './github.ts';
import type { GithubTrustStore } from './github-trust.ts';
import type { InstallationRepoStore } from './installation-repos.ts';
import type { OAuthStore } from './oauth.ts';
import type { StoreRules } from './rules.ts';
import type { Store } from './types.ts';
import type { UploadStore } from './uploads.ts';
import type { WebhookSecretStore } from './webhook-secrets.ts';
import type { WebhookStore } from './webhooks.ts';

/**
 * One database, whichever it is: every store the wiring needs, each behind its interface. Nothing
 * outside `server/store/` is given a database handle, so the same wiring runs on SQLite and on
 * PostgreSQL.
 */
export interface StoreBackend {
  /** Tenancy, keys, deployments, revisions, logs, listeners, integrations, tracing projects. */
  readonly core: Store;
  readonly webhooks: WebhookStore;
  readonly webhookSecrets: WebhookSecretStore;
  readonly oauth: OAuthStore;
  readonly uploads: UploadStore;
  readonly installationRepos: InstallationRepoStore;
  readonly agents: AgentStore;
  /** Keyless CI: trust entries, used ID-token `jti`s, keys minted from tokens. */
  readonly githubTrust: GithubTrustStore;
  /** The GitHub round trip: setup states, proven installations, the status outbox. */
  readonly github: GithubStore;
  /** The web console: sessions and the live pages' fingerprints. */
  readonly console: ConsoleStore;

  /** The audit log: entries written with the changes they record, read back per organization or workspace. */
  readonly audit: AuditStore;
  /** Outgoing events: workspaces' subscriptions and the outbox the triggers fill. */
  readonly events: EventStore;
  /** What the cluster-wide metrics read from the database at each scrape. */
  readonly clusterReadings: ClusterReadings;
  /**
   * News between the processes that share this database (wake-ups, cache invalidation) and who
   * runs the singletons: LISTEN/NOTIFY and advisory locks on PostgreSQL, nothing to do on SQLite.
   */
  readonly coordination: Coordination;
  /** Where the data lives, for the start-up log line (never a password). */
  readonly description: string;
  /** A real write, undone; throws the store's error when writes fail (start-up and readiness). */
  probeWrite(): Promise<void>;
  close(): Promise<void>;
}

export type OpenStoreOptions = {
  secretBox: SecretBox;
  /** SQLite only: `FULL` (default) or `NORMAL`. */
  synchronous?: 'FULL' | 'NORMAL';
  /** Where the coordination reports a lost listening connection or an unsent notice (silent when absent). */
  log?: Logger;
  /**
   * The domain's decisions and words the stores need (`server/domain/store-rules.ts`); without them
   * a refused write throws a plain `StoreRefusal` and no revision can be started.
   */
  rules?: StoreRules;
};

/** True for a `DATABASE_URL` that names a PostgreSQL server rather than an SQLite file. */
export function isPostgresUrl(databaseUrl: string): boolean {
  return /^postgres(ql)?:\/\//i.test(databaseUrl);
}

/**
 * The file an SQLite `DATABASE_URL` names (`sqlite:` prefix removed, `:memory:` kept), or null for a
 * database server. The server prepares its directory and keeps a generated key beside it.
 */
export function databaseFilePath(databaseUrl: string): string | null {
  return isPostgresUrl(databaseUrl) ? null : databaseUrl.replace(/^sqlite:(\/\/)?/, '');
}
