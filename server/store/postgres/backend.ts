import { silentLogger } from '../../logger.ts';
import { StartupError } from '../../startup-errors.ts';
import { SqlAgentStore } from '../agents.ts';
import { SqlAuditStore } from '../audit.ts';
import type { OpenStoreOptions, StoreBackend } from '../backend.ts';
import { SqlClusterReadings } from '../cluster-readings.ts';
import { SqlConsoleStore } from '../console.ts';
import { openCoreStore } from '../core.ts';
import { SqlEventStore } from '../events.ts';
import { SqlGithubStore } from '../github.ts';
import { SqlGithubTrustStore } from '../github-trust.ts';
import { SqlInstallationRepoStore } from '../installation-repos.ts';
import { SqlOAuthStore } from '../oauth.ts';
import { postgresConnectionFailure, storageProblem } from '../storage-errors.ts';
import { SqlUploadStore } from '../uploads.ts';
import { SqlWebhookSecretStore } from '../webhook-secrets.ts';
import { SqlWebhookStore } from '../webhooks.ts';
import { PgCoordination } from './coordination.ts';
import { migrate, PgDb } from './db.ts';
import { PgDeploymentStore } from './deployments.ts';

/** The PostgreSQL backend: one pool, migrated under an advisory lock, every store on it. */
export async function openPostgresBackend(url: string, options: OpenStoreOptions & { poolSize?: number }): Promise<StoreBackend> {
  const db = new PgDb(url, { max: options.poolSize });
  try {
    await migrate(db);
  } catch (error) {
    await db.close();
    throw startupProblem(error, url) ?? error;
  }
  const core = openCoreStore(db, options.secretBox, options.rules, { deployments: new PgDeploymentStore(db, options.secretBox, options.rules) });
  const coordination = await PgCoordination.open(url, db, options.log ?? silentLogger);
  return {
    core,
    webhooks: new SqlWebhookStore(db),
    webhookSecrets: new SqlWebhookSecretStore(db),
    oauth: new SqlOAuthStore(db, options.rules),
    uploads: new SqlUploadStore(db),
    installationRepos: new SqlInstallationRepoStore(db),
    agents: new SqlAgentStore(db),
    githubTrust: new SqlGithubTrustStore(db),
    audit: new SqlAuditStore(db),
    events: new SqlEventStore(db),
    clusterReadings: new SqlClusterReadings(db),
    github: new SqlGithubStore(db, options.rules),
    console: new SqlConsoleStore(db),
    coordination,
    description: redact(url),
    probeWrite: () => core.probeWrite(),
    async close() {
      await coordination.close();
      await db.close();
    },
  };
}

/** The URL without its password, for logs. */
export function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** Causes a server cannot start with, in one sentence naming the (redacted) URL; null for anything else. */
const START_CAUSES: Record<string, string> = {
  '28P01': 'the password was refused',
  '28000': 'the role may not connect',
  '3D000': 'the database does not exist',
  '42501': 'the role may not create the tables',
};

function startupProblem(error: unknown, url: string): StartupError | null {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  const converted = postgresConnectionFailure(error);
  const cause =
    (typeof code === 'string' ? START_CAUSES[code] : undefined) ??
    (converted !== error ? (converted as Error).message : storageProblem(error))?.replace(/\.$/, '');
  if (!cause) return null;
  return new StartupError(`Cannot open the PostgreSQL database at ${redact(url)}: ${cause.charAt(0).toLowerCase()}${cause.slice(1)} (check DATABASE_URL).`);
}
