import type { Row } from './db.ts';
import { toIntegration } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { IntegrationRecord } from './types.ts';

/** The single-use `state` of an install URL, bound to a workspace. */
export type SetupState = { id: string; tenant_id: string; name: string | null; expires_at: string; created_at: string };

/**
 * One installation on its way to a workspace (migration 019): proven once `account` is set,
 * linked when the installer confirms with the token whose SHA-256 is `confirm_hash`.
 */
export type LinkAttempt = {
  id: string;
  setup_state_id: string | null;
  installation_id: number;
  account: InstallationAccount | null;
  confirm_hash: string | null;
  expires_at: string;
  created_at: string;
};

/** The single-use `state` of a manifest page, bound to the organization that asked. */
export type ManifestState = { id: string; organization_id: string; expires_at: string; created_at: string };

/** The App GitHub made from the manifest: its secrets sealed (encrypted JSON). */
export type AppRegistration = { app_id: string; slug: string; sealed: string; created_at: string };

/** The GitHub account an installation was proven to belong to. */
export type InstallationAccount = { login: string; id: number; type: string };

/** A revision's change (a status, or `DELETED` for its deployment) waiting to be told to GitHub. */
export type OutboxEvent = {
  id: number;
  revision_id: string;
  deployment_id: string;
  event: string;
  attempts: number;
  outcome: string | null;
  created_at: string;
};

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

/** The check run made for a revision. */
export type CheckRunRecord = { revision_id: string; check_run_id: number; installation_id: number; owner: string; repo: string; created_at: string };

/** A pull-request preview: the child deployment, its parent and pull request. */
export type PreviewRecord = {
  deployment_id: string;
  parent_deployment_id: string;
  tenant_id: string;
  pull_request: number;
  last_activity_at: string;
  created_at: string;
};

/** What a link uses up, in the transaction that stores it: the attempt, and the install URL's state when it had one. */
export type LinkUsedUp = { attemptId: string; setupStateId: string | null };

/** Storage of the GitHub round trip (contract §12): setup states, proven installations, the status outbox, previews. */
export interface GithubStore {
  createSetupState(state: SetupState): Promise<void>;
  /** Deletes and answers the state: a second use finds nothing. */
  takeSetupState(id: string): Promise<SetupState | null>;
  /** The state, left usable: it is used up only with the link it leads to (`linkInstallation`). */
  setupState(id: string): Promise<SetupState | null>;
  createLinkAttempt(attempt: LinkAttempt): Promise<void>;
  createManifestState(state: ManifestState): Promise<void>;
  /** Deletes and answers the state: a second use finds nothing. */
  takeManifestState(id: string): Promise<ManifestState | null>;
  /** Stores the App made from the manifest, replacing one made before. */
  saveAppRegistration(registration: AppRegistration): Promise<void>;
  appRegistration(): Promise<AppRegistration | null>;
  linkAttempt(id: string): Promise<LinkAttempt | null>;
  /** Records who the installation was proven to belong to, and the hash of the token that confirms the link. */
  proveLinkAttempt(id: string, account: InstallationAccount, confirmHash: string): Promise<void>;
  /**
   * Links a proven installation to the workspace in one transaction: the integration (made, or the
   * workspace's existing one for the installation) and its account. Links of other organizations
   * that were never proven (a bare `installation_id`) are removed; a proven one elsewhere is refused (`installation_linked_elsewhere`).
   */
  linkInstallation(integration: IntegrationRecord, account: InstallationAccount, now: string, usedUp?: LinkUsedUp): Promise<IntegrationRecord>;
  accountOf(integrationId: string): Promise<InstallationAccount | null>;

  /** The oldest unsent event of each revision that is due (`next_attempt_at` passed), oldest revisions first. */
  dueEvents(now: string, limit: number): Promise<OutboxEvent[]>;
  finishEvent(id: number, outcome: string, now: string): Promise<void>;
  /**
   * Keeps the event for later: not due before `nextAttemptAt`, and `attempts` goes up unless the
   * event only waits its turn (the installation's pace), which is no failed attempt.
   */
  retryEvent(id: number, nextAttemptAt: string, outcome: string, failedAttempt?: boolean): Promise<void>;
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

  checkRun(revisionId: string): Promise<CheckRunRecord | null>;
  recordCheckRun(record: CheckRunRecord): Promise<void>;

  recordPreview(preview: PreviewRecord): Promise<void>;
  previewFor(parentDeploymentId: string, pullRequest: number): Promise<PreviewRecord | null>;
  previewsOf(parentDeploymentId: string): Promise<PreviewRecord[]>;
  allPreviews(): Promise<PreviewRecord[]>;
  touchPreview(deploymentId: string, now: string): Promise<void>;
  forgetPreview(deploymentId: string): Promise<void>;
}

const GITHUB_SQL = {
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

function toGithubDeployment(row: Row): GithubDeploymentRecord {
  return { ...(row as GithubDeploymentRecord), github_deployment_id: Number(row.github_deployment_id), installation_id: Number(row.installation_id) };
}

/** The GitHub round trip's storage, on either database. */
export class SqlGithubStore extends SqlStore implements GithubStore {
  async createSetupState(state: SetupState): Promise<void> {
    await this.sql.run('INSERT INTO github_setup_states (id, tenant_id, name, expires_at, created_at) VALUES (?, ?, ?, ?, ?)', [
      state.id,
      state.tenant_id,
      state.name,
      state.expires_at,
      state.created_at,
    ]);
  }

  async takeSetupState(id: string): Promise<SetupState | null> {
    return (await this.sql.row<SetupState>('DELETE FROM github_setup_states WHERE id = ? RETURNING *', [id])) ?? null;
  }

  async setupState(id: string): Promise<SetupState | null> {
    return (await this.sql.row<SetupState>('SELECT * FROM github_setup_states WHERE id = ?', [id])) ?? null;
  }

  async createManifestState(state: ManifestState): Promise<void> {
    await this.sql.run('INSERT INTO github_manifest_states (id, organization_id, expires_at, created_at) VALUES (?, ?, ?, ?)', [
      state.id,
      state.organization_id,
      state.expires_at,
      state.created_at,
    ]);
  }

  async takeManifestState(id: string): Promise<ManifestState | null> {
    return (await this.sql.row<ManifestState>('DELETE FROM github_manifest_states WHERE id = ? RETURNING *', [id])) ?? null;
  }

  async saveAppRegistration(r: AppRegistration): Promise<void> {
    await this.sql.run(
      `INSERT INTO github_app_registrations (id, app_id, slug, sealed, created_at) VALUES (1, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET app_id = excluded.app_id, slug = excluded.slug, sealed = excluded.sealed, created_at = excluded.created_at`,
      [r.app_id, r.slug, r.sealed, r.created_at],
    );
  }

  async appRegistration(): Promise<AppRegistration | null> {
    return (await this.sql.row<AppRegistration>('SELECT app_id, slug, sealed, created_at FROM github_app_registrations WHERE id = 1')) ?? null;
  }

  async createLinkAttempt(a: LinkAttempt): Promise<void> {
    await this.sql.run(
      `INSERT INTO github_link_attempts (id, setup_state_id, installation_id, account_login, account_id, account_type, confirm_hash, expires_at, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        a.id,
        a.setup_state_id,
        a.installation_id,
        a.account?.login ?? null,
        a.account?.id ?? null,
        a.account?.type ?? null,
        a.confirm_hash,
        a.expires_at,
        a.created_at,
      ],
    );
  }

  async linkAttempt(id: string): Promise<LinkAttempt | null> {
    const row = await this.sql.row<Row>('SELECT * FROM github_link_attempts WHERE id = ?', [id]);
    if (!row) return null;
    return {
      id: row.id as string,
      setup_state_id: (row.setup_state_id as string | null) ?? null,
      installation_id: Number(row.installation_id),
      account: row.account_login === null || row.account_login === undefined ? null : toAccount(row),
      confirm_hash: (row.confirm_hash as string | null) ?? null,
      expires_at: row.expires_at as string,
      created_at: row.created_at as string,
    };
  }

  async proveLinkAttempt(id: string, account: InstallationAccount, confirmHash: string): Promise<void> {
    await this.sql.run('UPDATE github_link_attempts SET account_login = ?, account_id = ?, account_type = ?, confirm_hash = ? WHERE id = ?', [
      account.login,
      account.id,
      account.type,
      confirmHash,
      id,
    ]);
  }

  async linkInstallation(integration: IntegrationRecord, account: InstallationAccount, now: string, usedUp?: LinkUsedUp): Promise<IntegrationRecord> {
    return this.sql.tx(async (tx) => {
      if (usedUp) {
        // Used up with the link, in its transaction: a link that fails leaves them usable, and two confirmations link once.
        if ((await tx.run('DELETE FROM github_link_attempts WHERE id = ?', [usedUp.attemptId])) === 0) throw this.rules.refusal({ kind: 'link_attempt_used' });
        if (usedUp.setupStateId !== null && (await tx.run('DELETE FROM github_setup_states WHERE id = ?', [usedUp.setupStateId])) === 0)
          throw this.rules.refusal({ kind: 'link_attempt_used' });
      }
      // The same key as linking by a bare id: links of one installation are made one at a time.
      await tx.dialect.serialize(tx, `installation:${integration.installation_id}`);
      const others = await tx.rows<{ id: string; proven: number | null }>(GITHUB_SQL.otherOrganizationsLinks, [
        integration.installation_id,
        integration.tenant_id,
      ]);
      if (others.some((o) => o.proven)) throw this.rules.refusal({ kind: 'installation_linked_elsewhere', installationId: integration.installation_id });
      for (const other of others) await tx.run('DELETE FROM github_integrations WHERE id = ?', [other.id]);
      let row = await tx.row<Row>('SELECT * FROM github_integrations WHERE tenant_id = ? AND installation_id = ?', [
        integration.tenant_id,
        integration.installation_id,
      ]);
      if (!row) {
        await tx.run('INSERT INTO github_integrations (id, tenant_id, installation_id, name, suspended_at, created_at) VALUES (?, ?, ?, ?, NULL, ?)', [
          integration.id,
          integration.tenant_id,
          integration.installation_id,
          integration.name,
          integration.created_at,
        ]);
        row = (await tx.row<Row>('SELECT * FROM github_integrations WHERE id = ?', [integration.id]))!;
      }
      await tx.run(
        `INSERT INTO github_installation_accounts (integration_id, installation_id, account_login, account_id, account_type, verified_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (integration_id) DO UPDATE SET account_login = excluded.account_login, account_id = excluded.account_id, account_type = excluded.account_type, verified_at = excluded.verified_at`,
        [row.id, integration.installation_id, account.login, account.id, account.type, now],
      );
      return toIntegration(row);
    });
  }

  async accountOf(integrationId: string): Promise<InstallationAccount | null> {
    const row = await this.sql.row<Row>('SELECT * FROM github_installation_accounts WHERE integration_id = ?', [integrationId]);
    return row ? toAccount(row) : null;
  }

  async dueEvents(now: string, limit: number): Promise<OutboxEvent[]> {
    const rows = await this.sql.rows<OutboxEvent>(GITHUB_SQL.dueEvents, [now, limit]);
    return rows.map((r) => ({ ...r, id: Number(r.id), attempts: Number(r.attempts) }));
  }

  async finishEvent(id: number, outcome: string, now: string): Promise<void> {
    await this.sql.run('UPDATE github_outbox SET done_at = ?, outcome = ? WHERE id = ?', [now, outcome, id]);
  }

  async retryEvent(id: number, nextAttemptAt: string, outcome: string, failedAttempt = true): Promise<void> {
    await this.sql.run('UPDATE github_outbox SET attempts = attempts + ?, next_attempt_at = ?, outcome = ? WHERE id = ?', [
      failedAttempt ? 1 : 0,
      nextAttemptAt,
      outcome,
      id,
    ]);
  }

  async prune(sentBefore: string, now: string): Promise<number> {
    const events = await this.sql.run('DELETE FROM github_outbox WHERE done_at IS NOT NULL AND done_at < ?', [sentBefore]);
    const states = await this.sql.run('DELETE FROM github_setup_states WHERE expires_at < ?', [now]);
    const manifests = await this.sql.run('DELETE FROM github_manifest_states WHERE expires_at < ?', [now]);
    return events + states + manifests + (await this.sql.run('DELETE FROM github_link_attempts WHERE expires_at < ?', [now]));
  }

  async pendingCount(): Promise<number> {
    return Number((await this.sql.row<{ n: number | string }>('SELECT count(*) AS n FROM github_outbox WHERE done_at IS NULL'))?.n ?? 0);
  }

  async wasSent(revisionId: string, call: string, state: string): Promise<boolean> {
    return (await this.sql.row('SELECT 1 AS sent FROM github_sent WHERE revision_id = ? AND call = ? AND state = ?', [revisionId, call, state])) !== undefined;
  }

  async markSent(revisionId: string, call: string, state: string, now: string): Promise<void> {
    await this.sql.run('INSERT INTO github_sent (revision_id, call, state, sent_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING', [
      revisionId,
      call,
      state,
      now,
    ]);
  }

  async githubDeployment(revisionId: string): Promise<GithubDeploymentRecord | null> {
    const row = await this.sql.row<Row>('SELECT * FROM github_deployments WHERE revision_id = ?', [revisionId]);
    return row ? toGithubDeployment(row) : null;
  }

  async recordGithubDeployment(r: GithubDeploymentRecord): Promise<void> {
    await this.sql.run(
      `INSERT INTO github_deployments (revision_id, deployment_id, github_deployment_id, installation_id, owner, repo, sha, environment, environment_url, log_url, last_state, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        r.revision_id,
        r.deployment_id,
        r.github_deployment_id,
        r.installation_id,
        r.owner,
        r.repo,
        r.sha,
        r.environment,
        r.environment_url,
        r.log_url,
        r.last_state,
        r.created_at,
      ],
    );
  }

  async setGithubDeploymentState(revisionId: string, state: string): Promise<void> {
    await this.sql.run('UPDATE github_deployments SET last_state = ? WHERE revision_id = ?', [state, revisionId]);
  }

  async githubDeploymentsOf(deploymentId: string): Promise<GithubDeploymentRecord[]> {
    return (await this.sql.rows<Row>('SELECT * FROM github_deployments WHERE deployment_id = ? ORDER BY created_at, revision_id', [deploymentId])).map(
      toGithubDeployment,
    );
  }

  async checkRun(revisionId: string): Promise<CheckRunRecord | null> {
    const row = await this.sql.row<Row>('SELECT * FROM github_check_runs WHERE revision_id = ?', [revisionId]);
    return row ? ({ ...row, check_run_id: Number(row.check_run_id), installation_id: Number(row.installation_id) } as CheckRunRecord) : null;
  }

  async recordCheckRun(r: CheckRunRecord): Promise<void> {
    await this.sql.run(
      'INSERT INTO github_check_runs (revision_id, check_run_id, installation_id, owner, repo, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
      [r.revision_id, r.check_run_id, r.installation_id, r.owner, r.repo, r.created_at],
    );
  }

  async recordPreview(p: PreviewRecord): Promise<void> {
    await this.sql.run(
      'INSERT INTO github_previews (deployment_id, parent_deployment_id, tenant_id, pull_request, last_activity_at, created_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING',
      [p.deployment_id, p.parent_deployment_id, p.tenant_id, p.pull_request, p.last_activity_at, p.created_at],
    );
  }

  async previewFor(parentDeploymentId: string, pullRequest: number): Promise<PreviewRecord | null> {
    const row = await this.sql.row<PreviewRecord>('SELECT * FROM github_previews WHERE parent_deployment_id = ? AND pull_request = ?', [
      parentDeploymentId,
      pullRequest,
    ]);
    return row ? toPreview(row) : null;
  }

  async previewsOf(parentDeploymentId: string): Promise<PreviewRecord[]> {
    return (await this.sql.rows<PreviewRecord>('SELECT * FROM github_previews WHERE parent_deployment_id = ? ORDER BY created_at', [parentDeploymentId])).map(
      toPreview,
    );
  }

  async allPreviews(): Promise<PreviewRecord[]> {
    return (await this.sql.rows<PreviewRecord>('SELECT * FROM github_previews ORDER BY created_at')).map(toPreview);
  }

  async touchPreview(deploymentId: string, now: string): Promise<void> {
    await this.sql.run('UPDATE github_previews SET last_activity_at = ? WHERE deployment_id = ?', [now, deploymentId]);
  }

  async forgetPreview(deploymentId: string): Promise<void> {
    await this.sql.run('DELETE FROM github_previews WHERE deployment_id = ?', [deploymentId]);
  }
}

function toPreview(row: PreviewRecord): PreviewRecord {
  return { ...row, pull_request: Number(row.pull_request) };
}
