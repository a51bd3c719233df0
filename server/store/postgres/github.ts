import { Conflict } from '../../domain/errors.ts';
import { GITHUB_SQL, toGithubDeployment, type GithubDeploymentRecord, type GithubStore, type InstallationAccount, type OutboxEvent, type PreviewRecord, type SetupState } from '../github.ts';
import { toIntegration, type Row } from '../rows.ts';
import type { IntegrationRecord } from '../types.ts';
import type { PgDb } from './db.ts';

/** The GitHub round trip's storage on PostgreSQL (mirrors `../github.ts`). */
export class PgGithubStore implements GithubStore {
  readonly #db: PgDb;

  constructor(db: PgDb) {
    this.#db = db;
  }

  async createSetupState(state: SetupState): Promise<void> {
    await this.#db.run('INSERT INTO github_setup_states (id, tenant_id, name, expires_at, created_at) VALUES (?, ?, ?, ?, ?)', [state.id, state.tenant_id, state.name, state.expires_at, state.created_at]);
  }

  async takeSetupState(id: string): Promise<SetupState | null> {
    return (await this.#db.row<SetupState>('DELETE FROM github_setup_states WHERE id = ? RETURNING *', [id])) ?? null;
  }

  async linkInstallation(integration: IntegrationRecord, account: InstallationAccount, now: string): Promise<IntegrationRecord> {
    const db = this.#db;
    return db.tx(async (c) => {
      // The same lock as linking by a bare id: links of one installation are made one at a time.
      await c.query("SELECT pg_advisory_xact_lock(hashtextextended('control-plane:installation:' || $1::text, 0))", [String(integration.installation_id)]);
      const others = await db.rows<{ id: string; proven: number | null }>(GITHUB_SQL.otherOrganizationsLinks, [integration.installation_id, integration.tenant_id], c);
      if (others.some((o) => o.proven)) throw new Conflict(`Installation ${integration.installation_id} is linked to another organization.`);
      for (const other of others) await db.run('DELETE FROM github_integrations WHERE id = ?', [other.id], c);
      let row = await db.row<Row>('SELECT * FROM github_integrations WHERE tenant_id = ? AND installation_id = ?', [integration.tenant_id, integration.installation_id], c);
      if (!row) {
        await db.run('INSERT INTO github_integrations (id, tenant_id, installation_id, name, suspended_at, created_at) VALUES (?, ?, ?, ?, NULL, ?)', [
          integration.id,
          integration.tenant_id,
          integration.installation_id,
          integration.name,
          integration.created_at,
        ], c);
        row = (await db.row<Row>('SELECT * FROM github_integrations WHERE id = ?', [integration.id], c))!;
      }
      await db.run(
        `INSERT INTO github_installation_accounts (integration_id, installation_id, account_login, account_id, account_type, verified_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (integration_id) DO UPDATE SET account_login = excluded.account_login, account_id = excluded.account_id, account_type = excluded.account_type, verified_at = excluded.verified_at`,
        [row.id, integration.installation_id, account.login, account.id, account.type, now],
        c,
      );
      return toIntegration(row);
    });
  }

  async accountOf(integrationId: string): Promise<InstallationAccount | null> {
    const row = await this.#db.row<Row>('SELECT * FROM github_installation_accounts WHERE integration_id = ?', [integrationId]);
    return row ? { login: row.account_login as string, id: Number(row.account_id), type: row.account_type as string } : null;
  }

  async dueEvents(now: string, limit: number): Promise<OutboxEvent[]> {
    const rows = await this.#db.rows<OutboxEvent>(GITHUB_SQL.dueEvents, [now, limit]);
    return rows.map((r) => ({ ...r, id: Number(r.id) }));
  }

  async finishEvent(id: number, outcome: string, now: string): Promise<void> {
    await this.#db.run('UPDATE github_outbox SET done_at = ?, outcome = ? WHERE id = ?', [now, outcome, id]);
  }

  async retryEvent(id: number, nextAttemptAt: string, outcome: string): Promise<void> {
    await this.#db.run('UPDATE github_outbox SET attempts = attempts + 1, next_attempt_at = ?, outcome = ? WHERE id = ?', [nextAttemptAt, outcome, id]);
  }

  async noteEvent(id: number, outcome: string): Promise<void> {
    await this.#db.run('UPDATE github_outbox SET outcome = ? WHERE id = ?', [outcome, id]);
  }

  async prune(sentBefore: string, now: string): Promise<number> {
    const events = await this.#db.run('DELETE FROM github_outbox WHERE done_at IS NOT NULL AND done_at < ?', [sentBefore]);
    return events + (await this.#db.run('DELETE FROM github_setup_states WHERE expires_at < ?', [now]));
  }

  async pendingCount(): Promise<number> {
    return Number((await this.#db.row<{ n: string }>('SELECT count(*) AS n FROM github_outbox WHERE done_at IS NULL'))?.n ?? 0);
  }

  async wasSent(revisionId: string, call: string, state: string): Promise<boolean> {
    return (await this.#db.row('SELECT 1 FROM github_sent WHERE revision_id = ? AND call = ? AND state = ?', [revisionId, call, state])) !== undefined;
  }

  async markSent(revisionId: string, call: string, state: string, now: string): Promise<void> {
    await this.#db.run('INSERT INTO github_sent (revision_id, call, state, sent_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING', [revisionId, call, state, now]);
  }

  async githubDeployment(revisionId: string): Promise<GithubDeploymentRecord | null> {
    const row = await this.#db.row<Row>('SELECT * FROM github_deployments WHERE revision_id = ?', [revisionId]);
    return row ? toGithubDeployment(row) : null;
  }

  async recordGithubDeployment(r: GithubDeploymentRecord): Promise<void> {
    await this.#db.run(
      `INSERT INTO github_deployments (revision_id, deployment_id, github_deployment_id, installation_id, owner, repo, sha, environment, environment_url, log_url, last_state, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [r.revision_id, r.deployment_id, r.github_deployment_id, r.installation_id, r.owner, r.repo, r.sha, r.environment, r.environment_url, r.log_url, r.last_state, r.created_at],
    );
  }

  async setGithubDeploymentState(revisionId: string, state: string): Promise<void> {
    await this.#db.run('UPDATE github_deployments SET last_state = ? WHERE revision_id = ?', [state, revisionId]);
  }

  async recordPreview(p: PreviewRecord): Promise<void> {
    await this.#db.run(
      `INSERT INTO github_previews (deployment_id, parent_deployment_id, tenant_id, pull_request, last_activity_at, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
      [p.deployment_id, p.parent_deployment_id, p.tenant_id, p.pull_request, p.last_activity_at, p.created_at],
    );
  }

  async previewFor(parentDeploymentId: string, pullRequest: number): Promise<PreviewRecord | null> {
    return (await this.#db.row<PreviewRecord>('SELECT * FROM github_previews WHERE parent_deployment_id = ? AND pull_request = ?', [parentDeploymentId, pullRequest])) ?? null;
  }

  async previewsOf(parentDeploymentId: string): Promise<PreviewRecord[]> {
    return this.#db.rows<PreviewRecord>('SELECT * FROM github_previews WHERE parent_deployment_id = ? ORDER BY created_at', [parentDeploymentId]);
  }

  async allPreviews(): Promise<PreviewRecord[]> {
    return this.#db.rows<PreviewRecord>('SELECT * FROM github_previews ORDER BY created_at');
  }

  async touchPreview(deploymentId: string, now: string): Promise<void> {
    await this.#db.run('UPDATE github_previews SET last_activity_at = ? WHERE deployment_id = ?', [now, deploymentId]);
  }

  async forgetPreview(deploymentId: string): Promise<void> {
    await this.#db.run('DELETE FROM github_previews WHERE deployment_id = ?', [deploymentId]);
  }

  async githubDeploymentsOf(deploymentId: string): Promise<GithubDeploymentRecord[]> {
    return (await this.#db.rows<Row>('SELECT * FROM github_deployments WHERE deployment_id = ? ORDER BY created_at, revision_id', [deploymentId])).map(toGithubDeployment);
  }
}
