import type Database from 'better-sqlite3';
import { Conflict } from '../domain/errors.ts';
import { toIntegration, type Row } from './rows.ts';
import type { IntegrationRecord } from './types.ts';

/** The single-use `state` of an install URL, bound to a workspace. */
export type SetupState = { id: string; tenant_id: string; name: string | null; expires_at: string; created_at: string };

/** The GitHub account an installation was proven to belong to. */
export type InstallationAccount = { login: string; id: number; type: string };

/** A revision's change (a status, or `DELETED` for its deployment) waiting to be told to GitHub. */
export type OutboxEvent = { id: number; revision_id: string; deployment_id: string; event: string; attempts: number; outcome: string | null; created_at: string };

/** The GitHub deployment made for a revision. */
export type GithubDeploymentRecord = {
  revision_id: string;
  deployment_id: string;
  github_deployment_id: number;
  installation_id: number;
  owner: string;
  repo: string;
  sha: string;
  environment: string;
  environment_url: string | null;
  log_url: string | null;
  last_state: string | null;
  created_at: string;
};

/** A pull-request preview: the child deployment, its parent and pull request. */
export type PreviewRecord = { deployment_id: string; parent_deployment_id: string; tenant_id: string; pull_request: number; last_activity_at: string; created_at: string };

/** Storage of the GitHub round trip (contract §12): setup states, proven installations, the status outbox, previews. */
export interface GithubStore {
  createSetupState(state: SetupState): Promise<void>;
  /** Deletes and answers the state: a second use finds nothing. */
  takeSetupState(id: string): Promise<SetupState | null>;
  /**
   * Links a proven installation to the workspace in one transaction: the integration (made, or the
   * workspace's existing one for the installation) and its account. Links of other organizations
   * that were never proven (a bare `installation_id`) are removed; a proven one elsewhere is a Conflict.
   */
  linkInstallation(integration: IntegrationRecord, account: InstallationAccount, now: string): Promise<IntegrationRecord>;
  accountOf(integrationId: string): Promise<InstallationAccount | null>;

  /** The oldest unsent event of each revision that is due (`next_attempt_at` passed), oldest revisions first. */
  dueEvents(now: string, limit: number): Promise<OutboxEvent[]>;
  finishEvent(id: number, outcome: string, now: string): Promise<void>;
  /** Keeps the event for later: `attempts` goes up, and it is not due before `nextAttemptAt`. */
  retryEvent(id: number, nextAttemptAt: string, outcome: string): Promise<void>;
  /** Records what the sender is about to do (a call under way), without making the event due later. */
  noteEvent(id: number, outcome: string): Promise<void>;
  /** Forgets events sent before `sentBefore` and setup states expired before `now`; answers the rows removed. */
  prune(sentBefore: string, now: string): Promise<number>;
  /** Unsent events, all revisions (tests and the health of the sender). */
  pendingCount(): Promise<number>;

  wasSent(revisionId: string, call: string, state: string): Promise<boolean>;
  markSent(revisionId: string, call: string, state: string, now: string): Promise<void>;

  githubDeployment(revisionId: string): Promise<GithubDeploymentRecord | null>;
  recordGithubDeployment(record: GithubDeploymentRecord): Promise<void>;
  setGithubDeploymentState(revisionId: string, state: string): Promise<void>;
  /** The deployment's GitHub deployments, oldest first. */
  githubDeploymentsOf(deploymentId: string): Promise<GithubDeploymentRecord[]>;

  recordPreview(preview: PreviewRecord): Promise<void>;
  previewFor(parentDeploymentId: string, pullRequest: number): Promise<PreviewRecord | null>;
  previewsOf(parentDeploymentId: string): Promise<PreviewRecord[]>;
  allPreviews(): Promise<PreviewRecord[]>;
  touchPreview(deploymentId: string, now: string): Promise<void>;
  forgetPreview(deploymentId: string): Promise<void>;
}

/** The SQL both dialects share (`?` placeholders; PostgreSQL's store numbers them). */
export const GITHUB_SQL = {
  dueEvents: `SELECT id, revision_id, deployment_id, event, attempts, outcome, created_at FROM github_outbox o
    WHERE done_at IS NULL
      AND id = (SELECT MIN(id) FROM github_outbox f WHERE f.revision_id = o.revision_id AND f.done_at IS NULL)
      AND (next_attempt_at IS NULL OR next_attempt_at <= ?)
    ORDER BY id LIMIT ?`,
  otherOrganizationsLinks: `SELECT g.id, (SELECT 1 FROM github_installation_accounts a WHERE a.integration_id = g.id) AS proven
    FROM github_integrations g JOIN workspaces w ON w.id = g.tenant_id
    WHERE g.installation_id = ? AND w.organization_id <> (SELECT organization_id FROM workspaces WHERE id = ?)`,
} as const;

function toAccount(row: Row): InstallationAccount {
  return { login: row.account_login as string, id: Number(row.account_id), type: row.account_type as string };
}

export function toGithubDeployment(row: Row): GithubDeploymentRecord {
  return { ...(row as GithubDeploymentRecord), github_deployment_id: Number(row.github_deployment_id), installation_id: Number(row.installation_id) };
}

export class SqliteGithubStore implements GithubStore {
  readonly #db: Database.Database;

  constructor(db: Database.Database) {
    this.#db = db;
  }

  async createSetupState(state: SetupState): Promise<void> {
    this.#db.prepare('INSERT INTO github_setup_states (id, tenant_id, name, expires_at, created_at) VALUES (@id, @tenant_id, @name, @expires_at, @created_at)').run(state);
  }

  async takeSetupState(id: string): Promise<SetupState | null> {
    return (this.#db.prepare('DELETE FROM github_setup_states WHERE id = ? RETURNING *').get(id) as SetupState | undefined) ?? null;
  }

  async linkInstallation(integration: IntegrationRecord, account: InstallationAccount, now: string): Promise<IntegrationRecord> {
    const db = this.#db;
    return db.transaction((): IntegrationRecord => {
      const others = db.prepare(GITHUB_SQL.otherOrganizationsLinks).all(integration.installation_id, integration.tenant_id) as Array<{ id: string; proven: number | null }>;
      if (others.some((o) => o.proven)) throw new Conflict(`Installation ${integration.installation_id} is linked to another organization.`);
      for (const other of others) db.prepare('DELETE FROM github_integrations WHERE id = ?').run(other.id);
      let row = db.prepare('SELECT * FROM github_integrations WHERE tenant_id = ? AND installation_id = ?').get(integration.tenant_id, integration.installation_id) as Row | undefined;
      if (!row) {
        db.prepare('INSERT INTO github_integrations (id, tenant_id, installation_id, name, suspended_at, created_at) VALUES (?, ?, ?, ?, NULL, ?)').run(
          integration.id,
          integration.tenant_id,
          integration.installation_id,
          integration.name,
          integration.created_at,
        );
        row = db.prepare('SELECT * FROM github_integrations WHERE id = ?').get(integration.id) as Row;
      }
      db.prepare(
        `INSERT INTO github_installation_accounts (integration_id, installation_id, account_login, account_id, account_type, verified_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (integration_id) DO UPDATE SET account_login = excluded.account_login, account_id = excluded.account_id, account_type = excluded.account_type, verified_at = excluded.verified_at`,
      ).run(row.id, integration.installation_id, account.login, account.id, account.type, now);
      return toIntegration(row);
    })();
  }

  async accountOf(integrationId: string): Promise<InstallationAccount | null> {
    const row = this.#db.prepare('SELECT * FROM github_installation_accounts WHERE integration_id = ?').get(integrationId) as Row | undefined;
    return row ? toAccount(row) : null;
  }

  async dueEvents(now: string, limit: number): Promise<OutboxEvent[]> {
    return this.#db.prepare(GITHUB_SQL.dueEvents).all(now, limit) as OutboxEvent[];
  }

  async finishEvent(id: number, outcome: string, now: string): Promise<void> {
    this.#db.prepare('UPDATE github_outbox SET done_at = ?, outcome = ? WHERE id = ?').run(now, outcome, id);
  }

  async retryEvent(id: number, nextAttemptAt: string, outcome: string): Promise<void> {
    this.#db.prepare('UPDATE github_outbox SET attempts = attempts + 1, next_attempt_at = ?, outcome = ? WHERE id = ?').run(nextAttemptAt, outcome, id);
  }

  async noteEvent(id: number, outcome: string): Promise<void> {
    this.#db.prepare('UPDATE github_outbox SET outcome = ? WHERE id = ?').run(outcome, id);
  }

  async prune(sentBefore: string, now: string): Promise<number> {
    const events = this.#db.prepare('DELETE FROM github_outbox WHERE done_at IS NOT NULL AND done_at < ?').run(sentBefore).changes;
    return events + this.#db.prepare('DELETE FROM github_setup_states WHERE expires_at < ?').run(now).changes;
  }

  async pendingCount(): Promise<number> {
    return (this.#db.prepare('SELECT count(*) AS n FROM github_outbox WHERE done_at IS NULL').get() as { n: number }).n;
  }

  async wasSent(revisionId: string, call: string, state: string): Promise<boolean> {
    return this.#db.prepare('SELECT 1 FROM github_sent WHERE revision_id = ? AND call = ? AND state = ?').get(revisionId, call, state) !== undefined;
  }

  async markSent(revisionId: string, call: string, state: string, now: string): Promise<void> {
    this.#db.prepare('INSERT INTO github_sent (revision_id, call, state, sent_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING').run(revisionId, call, state, now);
  }

  async githubDeployment(revisionId: string): Promise<GithubDeploymentRecord | null> {
    const row = this.#db.prepare('SELECT * FROM github_deployments WHERE revision_id = ?').get(revisionId) as Row | undefined;
    return row ? toGithubDeployment(row) : null;
  }

  async recordGithubDeployment(record: GithubDeploymentRecord): Promise<void> {
    this.#db
      .prepare(
        `INSERT INTO github_deployments (revision_id, deployment_id, github_deployment_id, installation_id, owner, repo, sha, environment, environment_url, log_url, last_state, created_at)
         VALUES (@revision_id, @deployment_id, @github_deployment_id, @installation_id, @owner, @repo, @sha, @environment, @environment_url, @log_url, @last_state, @created_at)`,
      )
      .run(record);
  }

  async setGithubDeploymentState(revisionId: string, state: string): Promise<void> {
    this.#db.prepare('UPDATE github_deployments SET last_state = ? WHERE revision_id = ?').run(state, revisionId);
  }

  async recordPreview(p: PreviewRecord): Promise<void> {
    this.#db
      .prepare(
        `INSERT INTO github_previews (deployment_id, parent_deployment_id, tenant_id, pull_request, last_activity_at, created_at)
         VALUES (@deployment_id, @parent_deployment_id, @tenant_id, @pull_request, @last_activity_at, @created_at) ON CONFLICT DO NOTHING`,
      )
      .run(p);
  }

  async previewFor(parentDeploymentId: string, pullRequest: number): Promise<PreviewRecord | null> {
    return (this.#db.prepare('SELECT * FROM github_previews WHERE parent_deployment_id = ? AND pull_request = ?').get(parentDeploymentId, pullRequest) as PreviewRecord | undefined) ?? null;
  }

  async previewsOf(parentDeploymentId: string): Promise<PreviewRecord[]> {
    return this.#db.prepare('SELECT * FROM github_previews WHERE parent_deployment_id = ? ORDER BY created_at').all(parentDeploymentId) as PreviewRecord[];
  }

  async allPreviews(): Promise<PreviewRecord[]> {
    return this.#db.prepare('SELECT * FROM github_previews ORDER BY created_at').all() as PreviewRecord[];
  }

  async touchPreview(deploymentId: string, now: string): Promise<void> {
    this.#db.prepare('UPDATE github_previews SET last_activity_at = ? WHERE deployment_id = ?').run(now, deploymentId);
  }

  async forgetPreview(deploymentId: string): Promise<void> {
    this.#db.prepare('DELETE FROM github_previews WHERE deployment_id = ?').run(deploymentId);
  }

  async githubDeploymentsOf(deploymentId: string): Promise<GithubDeploymentRecord[]> {
    return (this.#db.prepare('SELECT * FROM github_deployments WHERE deployment_id = ? ORDER BY created_at, revision_id').all(deploymentId) as Row[]).map(toGithubDeployment);
  }
}
