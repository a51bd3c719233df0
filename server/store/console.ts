import { SqlStore } from './sql-store.ts';

/** A console session as stored: who signed in (the key), where it looks (the workspace), until when. */
export type ConsoleSessionRow = { tokenHash: string; keyId: string; workspaceId: string; createdAt: string; expiresAt: string };

/** A live session with what its key says about it: the key's organization and whether it is organization-scoped. */
export type ConsoleSessionFound = ConsoleSessionRow & { organizationId: string; organizationScoped: boolean };

/** What one open console page watches: a change to its fingerprint means the page is out of date. */
export type LiveSubject =
  /** A page of the deployments list: how many the workspace has, and the deployments the page shows. */
  | { kind: 'deployments'; tenantId: string; deploymentIds: readonly string[] }
  | { kind: 'deployment'; tenantId: string; deploymentId: string }
  | { kind: 'revision'; tenantId: string; deploymentId: string; revisionId: string };

/**
 * Storage of the web console (contract section 16): sessions, and the cheap fingerprints the live
 * pages are refreshed by.
 */
export interface ConsoleStore {
  createSession(session: ConsoleSessionRow): Promise<void>;
  /** The session whose token hashes to `tokenHash`, if it has not expired and its key is neither revoked nor expired. */
  findSession(tokenHash: string, now: string): Promise<ConsoleSessionFound | null>;
  setSessionWorkspace(tokenHash: string, workspaceId: string): Promise<void>;
  deleteSession(tokenHash: string): Promise<void>;
  /** Forgets sessions that ended before `now`; answers how many. */
  deleteExpiredSessions(now: string): Promise<number>;
  /** A text that changes whenever anything a page about `subject` shows changes (tenant-scoped: another workspace's ids give ''). */
  fingerprint(subject: LiveSubject): Promise<string>;
}

const SQL = {
  insert: 'INSERT INTO console_sessions (token_hash, key_id, workspace_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)',
  // The key is read with the session on every request: a revoked or expired key ends its sessions at once.
  find: `SELECT s.token_hash, s.key_id, s.workspace_id, s.created_at, s.expires_at, k.organization_id, k.workspace_id AS key_workspace_id
         FROM console_sessions s JOIN api_keys k ON k.id = s.key_id
         WHERE s.token_hash = ? AND s.expires_at > ? AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > ?)`,
  setWorkspace: 'UPDATE console_sessions SET workspace_id = ? WHERE token_hash = ?',
  delete: 'DELETE FROM console_sessions WHERE token_hash = ?',
  deleteExpired: 'DELETE FROM console_sessions WHERE expires_at <= ?',
  // A deployment created or removed changes the count; a shown one's own row or its active or latest
  // revision (a revision's status moves without its deployment's row) changes its part. Index look-ups
  // only: the tenant is compared as an expression (`|| ''`) so that neither database answers by
  // walking the workspace's tenant index (10,000 rows) instead of looking up the page's 20 ids.
  deploymentCount: 'SELECT COUNT(*) AS n FROM deployments WHERE tenant_id = @tenant_id',
  shownDeployments: (inList: string) => `SELECT d.id, d.status, d.updated_at,
                      (SELECT r.version FROM revisions r WHERE r.id = d.latest_revision_id) AS latest,
                      (SELECT r.version FROM revisions r WHERE r.id = d.active_revision_id) AS active
               FROM deployments d WHERE ${inList} AND d.tenant_id || '' = @tenant_id ORDER BY d.id`,
  // Only the newest revisions' versions: the ones that can still change (queued or in progress) are
  // always the newest, and an ended revision never changes; a deployment may have thousands.
  deployment: `SELECT d.status AS s, d.updated_at AS d,
                      (SELECT COUNT(*) FROM revisions r WHERE r.deployment_id = d.id) AS n,
                      (SELECT SUM(newest.version) FROM (SELECT r.version FROM revisions r WHERE r.deployment_id = d.id ORDER BY r.seq DESC LIMIT 25) newest) AS v
               FROM deployments d WHERE d.tenant_id = ? AND d.id = ?`,
  revision: `SELECT r.version AS v, r.updated_at AS u, (SELECT MAX(l.seq) FROM revision_logs l WHERE l.revision_id = r.id) AS l
             FROM revisions r WHERE r.tenant_id = ? AND r.deployment_id = ? AND r.id = ?`,
} as const;

/** The console's storage, on either database. */
export class SqlConsoleStore extends SqlStore implements ConsoleStore {
  async createSession(session: ConsoleSessionRow): Promise<void> {
    await this.sql.run(SQL.insert, [session.tokenHash, session.keyId, session.workspaceId, session.createdAt, session.expiresAt]);
  }

  findSession(tokenHash: string, now: string): Promise<ConsoleSessionFound | null> {
    return this.first(
      (row) => ({
        tokenHash: row.token_hash as string,
        keyId: row.key_id as string,
        workspaceId: row.workspace_id as string,
        createdAt: row.created_at as string,
        expiresAt: row.expires_at as string,
        organizationId: row.organization_id as string,
        organizationScoped: row.key_workspace_id === null,
      }),
      SQL.find,
      [tokenHash, now, now],
    );
  }

  async setSessionWorkspace(tokenHash: string, workspaceId: string): Promise<void> {
    await this.sql.run(SQL.setWorkspace, [workspaceId, tokenHash]);
  }

  async deleteSession(tokenHash: string): Promise<void> {
    await this.sql.run(SQL.delete, [tokenHash]);
  }

  deleteExpiredSessions(now: string): Promise<number> {
    return this.sql.run(SQL.deleteExpired, [now]);
  }

  async fingerprint(subject: LiveSubject): Promise<string> {
    switch (subject.kind) {
      case 'deployments': {
        const count = await this.sql.row(SQL.deploymentCount, { tenant_id: subject.tenantId });
        const shown =
          subject.deploymentIds.length === 0
            ? []
            : await this.sql.rows(SQL.shownDeployments(this.sql.dialect.inList('d.id', '@ids')), {
                tenant_id: subject.tenantId,
                ids: this.sql.dialect.list(subject.deploymentIds),
              });
        return [count, ...shown].map(rowText).join(';');
      }
      case 'deployment':
        return rowText(await this.sql.row(SQL.deployment, [subject.tenantId, subject.deploymentId]));
      case 'revision':
        return rowText(await this.sql.row(SQL.revision, [subject.tenantId, subject.deploymentId, subject.revisionId]));
    }
  }
}

function rowText(row: Record<string, unknown> | undefined): string {
  return row ? Object.values(row).map(String).join('|') : '';
}
