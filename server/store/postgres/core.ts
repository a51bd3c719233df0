
import type { ApiKey } from '../../../shared/schemas/api-key.ts';
import type { DeploymentListQuery, SourceConfig, SourceRevisionConfig } from '../../../shared/schemas/deployment.ts';
import type { ComputeConfig, ComputeType, Listener } from '../../../shared/schemas/listener.ts';
import type { LogEntry, LogFilter, LogLevel, LogType, RevisionListQuery, RevisionStatus } from '../../../shared/schemas/revision.ts';
import type { Secret } from '../../../shared/schemas/secret.ts';
import type { TracingProject } from '../../../shared/schemas/tracing-project.ts';
import type { Workspace } from '../../../shared/schemas/workspace.ts';
import type { SecretBox } from '../../crypto/secret-box.ts';
import { Conflict, NotFound } from '../../domain/errors.ts';
import { normalizeRepoUrl } from '../../domain/repo-url.ts';
import { HOT_QUERIES, LEASE_QUERIES, SET_RECONCILE_HEAD, TERMINAL } from '../hot-queries.ts';
import type {
  ApiKeyRecord,
  BootstrapResult,
  CreatedDeployment,
  DeploymentChange,
  DeploymentRecord,
  IntegrationRecord,
  ListenerRecord,
  NewDeployment,
  NewRevision,
  Page,
  PushRevisionInput,
  PushRevisionResult,
  RevisionRecord,
  RevisionRunner,
  RevisionTransition,
  RevisionWork,
  StartNextResult,
  Store,
  WorkLease,
} from '../types.ts';
import { escapeLike, isUniqueViolation, type PgDb, type Queryable, type Row } from './db.ts';
import { sealedIfSame, toApiKey, toDeployment, toIntegration, toListener, toRevision, toTracingProject, toWorkspace } from '../rows.ts';

const SANDBOX_LISTENER = `INSERT INTO listeners (id, tenant_id, compute_type, compute_id, compute_config, created_at, updated_at)
  VALUES (?, ?, 'sandbox', 'sandbox', '{"k8s_namespaces":[]}', ?, ?)`;

const TRANSITION = `UPDATE revisions SET status = ?, status_message = ?, version = version + 1, updated_at = ?
  WHERE id = ? AND status = ANY(?::text[])`;

/** A process's own lease, renewed only while still live: a lapsed one must re-check what it holds first. */
const RENEW_LIVE_PROCESS_LEASE = 'UPDATE process_leases SET lease_expires_at = ? WHERE process_id = ? AND lease_expires_at >= ?';

/**
 * The PostgreSQL store: the same methods as the SQLite store, each one transaction. Read-modify-write
 * methods lock the deployment row (`FOR UPDATE`), which serializes them per deployment as SQLite's
 * single writer does.
 */
export class PgCoreStore implements Store {
  readonly #db: PgDb;
  readonly #box: SecretBox;

  constructor(db: PgDb, box: SecretBox) {
    this.#db = db;
    this.#box = box;
  }

  close(): void {
    void this.#db.close();
  }

  async ping(): Promise<boolean> {
    return (await this.#db.row<{ ok: number }>('SELECT 1 AS ok'))?.ok === 1;
  }

  async probeWrite(): Promise<void> {
    // A committed write and its undoing, as the SQLite probe does: a full disk or a read-only server fails it.
    await this.#db.tx(async (c) => {
      await this.#db.run('DELETE FROM schema_migrations WHERE version = -1', [], c);
      await this.#db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (-1, repeat('x', 8192), 'readiness probe')", [], c);
      await this.#db.run('DELETE FROM schema_migrations WHERE version = -1', [], c);
    });
  }

  // ------------------------------------------------------------ tenancy and keys

  async bootstrap(input: { keyHash: string | null; keyId: string; now: string }): Promise<BootstrapResult> {
    const db = this.#db;
    return db.tx(async (c) => {
      // Two processes bootstrapping together create one organization and one workspace.
      await c.query('SELECT pg_advisory_xact_lock(7245193002)');
      const wasEmpty = (await db.row<{ n: number }>('SELECT count(*) AS n FROM api_keys', [], c))!.n === 0;
      let org = await db.row<{ id: string }>("SELECT id FROM organizations WHERE name = 'default'", [], c);
      if (!org) {
        org = { id: crypto.randomUUID() };
        await db.run("INSERT INTO organizations (id, name, created_at) VALUES (?, 'default', ?)", [org.id, input.now], c);
      }
      let ws = await db.row<{ id: string }>('SELECT id FROM workspaces WHERE organization_id = ? AND is_default = 1', [org.id], c);
      if (!ws) {
        ws = { id: crypto.randomUUID() };
        await db.run("INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, 'default', 1, ?)", [ws.id, org.id, input.now], c);
        await db.run(SANDBOX_LISTENER, [crypto.randomUUID(), ws.id, input.now, input.now], c);
      }
      if (input.keyHash) {
        await db.run(
          `INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at)
           VALUES (?, ?, NULL, ?, 'bootstrap key', ?)
           ON CONFLICT (key_hash) DO UPDATE SET revoked_at = NULL`,
          [input.keyId, org.id, input.keyHash, input.now],
          c,
        );
      }
      return { organizationId: org.id, workspaceId: ws.id, wasEmpty };
    });
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const row = await this.#db.row(HOT_QUERIES.apiKeyByHash, [keyHash]);
    return row ? { ...toApiKey(row), revoked: row.revoked_at !== null, key_hash: row.key_hash as string } : null;
  }

  async createApiKey(input: ApiKey & { key_hash: string }): Promise<void> {
    await this.#db.run('INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at) VALUES (?, ?, ?, ?, ?, ?)', [
      input.id,
      input.organization_id,
      input.workspace_id,
      input.key_hash,
      input.description,
      input.created_at,
    ]);
  }

  async listApiKeys(organizationId: string): Promise<ApiKey[]> {
    const rows = await this.#db.rows('SELECT * FROM api_keys WHERE organization_id = ? AND revoked_at IS NULL ORDER BY created_at DESC, rowid DESC', [organizationId]);
    return rows.map(toApiKey);
  }

  async revokeApiKey(organizationId: string, id: string, now: string): Promise<boolean> {
    return (await this.#db.run('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND organization_id = ? AND revoked_at IS NULL', [now, id, organizationId])) === 1;
  }

  async getWorkspace(id: string): Promise<(Workspace & { is_default: boolean }) | null> {
    const row = await this.#db.row('SELECT * FROM workspaces WHERE id = ?', [id]);
    return row ? { ...toWorkspace(row), is_default: row.is_default === 1 } : null;
  }

  async getDefaultWorkspace(organizationId: string): Promise<Workspace | null> {
    const row = await this.#db.row(HOT_QUERIES.defaultWorkspace, [organizationId]);
    return row ? toWorkspace(row) : null;
  }

  async createWorkspace(input: Workspace): Promise<void> {
    const db = this.#db;
    try {
      await db.tx(async (c) => {
        await db.run('INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, ?, 0, ?)', [input.id, input.organization_id, input.name, input.created_at], c);
        // Every workspace can deploy to the sandbox from its first minute, as the default one can.
        await db.run(SANDBOX_LISTENER, [crypto.randomUUID(), input.id, input.created_at, input.created_at], c);
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new Conflict(`A workspace named '${input.name}' already exists.`);
      throw error;
    }
  }

  async listWorkspaces(organizationId: string): Promise<Workspace[]> {
    const rows = await this.#db.rows('SELECT * FROM workspaces WHERE organization_id = ? ORDER BY created_at, rowid', [organizationId]);
    return rows.map(toWorkspace);
  }

  // ------------------------------------------------------------ deployments

  async createDeployment(input: NewDeployment): Promise<CreatedDeployment> {
    const db = this.#db;
    const { deployment: d, revision, tracingProject: tp, runner } = input;
    const cols = this.#deploymentColumns(d.source_config, d.source_revision_config, d.secrets);
    let revisionHeld = false;
    try {
      await db.tx(async (c) => {
        await db.run(
          `INSERT INTO deployments (id, tenant_id, name, source, source_config, source_revision_config, secrets, status,
             latest_revision_id, active_revision_id, image_version, deployment_type, integration_id, listener_id,
             repo_url_key, repo_ref, build_on_push, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            d.id,
            d.tenant_id,
            d.name,
            d.source,
            cols.source_config,
            cols.source_revision_config,
            cols.secrets,
            d.status,
            revision?.id ?? null,
            d.image_version,
            cols.deployment_type,
            d.source_config.integration_id,
            d.source_config.listener_id,
            d.source_config.repo_url ? normalizeRepoUrl(d.source_config.repo_url) : null,
            cols.repo_ref,
            cols.build_on_push,
            d.created_at,
            d.updated_at,
          ],
          c,
        );
        if (revision) revisionHeld = await this.#insertRevision(c, d.id, d.tenant_id, d.source, revision, d.created_at, sealedIfSame(revision.secrets, d.secrets, cols.secrets), runner);
        await db.run('INSERT INTO tracing_projects (id, tenant_id, name, deployment_id, created_at) VALUES (?, ?, ?, ?, ?)', [tp.id, tp.tenant_id, tp.name, tp.deployment_id, tp.created_at], c);
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new Conflict(`A deployment or tracing project named '${d.name}' already exists in this workspace.`);
      throw error;
    }
    return { deployment: { ...d, delete_tracing_project: false }, revisionHeld };
  }

  #deploymentColumns(sourceConfig: SourceConfig, revisionConfig: SourceRevisionConfig, secrets: Secret[]) {
    return {
      source_config: JSON.stringify(sourceConfig),
      source_revision_config: JSON.stringify(revisionConfig),
      secrets: this.#box.encryptJson(secrets),
      deployment_type: sourceConfig.deployment_type,
      build_on_push: sourceConfig.build_on_push ? 1 : 0,
      repo_ref: revisionConfig.repo_ref,
    };
  }

  /**
   * `sealedSecrets`: the revision's secrets already encrypted (the deployment's, in the same write).
   * True when it names `runner` (a started revision, its process lease live). FOR KEY SHARE: a sweep
   * deleting the process's row (it found the lease expired) is waited for, and then the revision
   * names no one, so it never names a process with no row; the process's own lease renewals (no key
   * change) are not held up by it.
   */
  async #insertRevision(c: Queryable, deploymentId: string, tenantId: string, source: string, revision: NewRevision, now: string, sealedSecrets?: string, runner?: RevisionRunner): Promise<boolean> {
    const stored = await this.#db.row<{ runner_id: string | null }>(
      `INSERT INTO revisions (id, deployment_id, tenant_id, status, status_message, source, source_revision_config, commit_sha, secrets, resource_spec, trigger, created_at, updated_at, runner_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT process_id FROM process_leases WHERE process_id = ? AND lease_expires_at >= ? FOR KEY SHARE))
       RETURNING runner_id`,
      [
        revision.id,
        deploymentId,
        tenantId,
        revision.status ?? 'QUEUED',
        revision.status_message ?? null,
        source,
        JSON.stringify(revision.source_revision_config),
        revision.source_revision_config.repo_commit_sha ?? null,
        sealedSecrets ?? this.#box.encryptJson(revision.secrets),
        revision.resource_spec ? JSON.stringify(revision.resource_spec) : null,
        revision.trigger,
        now,
        now,
        runner?.owner ?? null,
        runner?.now ?? null,
      ],
      c,
    );
    for (const log of revision.logs ?? []) await this.#insertLog(c, revision.id, log, now);
    return stored!.runner_id !== null;
  }

  async getDeployment(tenantId: string, id: string): Promise<DeploymentRecord | null> {
    const row = await this.#db.row(HOT_QUERIES.deployment, [id, tenantId]);
    return row ? toDeployment(row, this.#box) : null;
  }

  async getDeploymentById(id: string): Promise<DeploymentRecord | null> {
    const row = await this.#db.row(HOT_QUERIES.deploymentById, [id]);
    return row ? toDeployment(row, this.#box) : null;
  }

  async listDeployments(tenantId: string, query: DeploymentListQuery): Promise<Page<DeploymentRecord>> {
    const where = ['tenant_id = ?'];
    const values: unknown[] = [tenantId];
    // SQLite's LIKE ignores ASCII case; ILIKE does here.
    if (query.name_contains) {
      where.push("name ILIKE ? ESCAPE '\\'");
      values.push(`%${escapeLike(query.name_contains)}%`);
    }
    if (query.status) {
      where.push('status = ?');
      values.push(query.status);
    }
    if (query.deployment_type) {
      where.push('deployment_type = ?');
      values.push(query.deployment_type);
    }
    if (query.image_version) {
      where.push('image_version = ?');
      values.push(query.image_version);
    }
    if (query.deployment_ids) {
      where.push('id = ANY(?::text[])');
      values.push(query.deployment_ids);
    }
    values.push(query.limit, query.offset);
    const rows = await this.#db.rows(`SELECT * FROM deployments WHERE ${where.join(' AND ')} ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?`, values);
    return { resources: rows.map((row) => toDeployment(row, this.#box)), offset: query.offset + rows.length };
  }

  async updateDeployment(
    tenantId: string,
    id: string,
    plan: (current: DeploymentRecord) => DeploymentChange,
    now: string,
  ): Promise<{ deployment: DeploymentRecord; revision: RevisionRecord | null }> {
    const db = this.#db;
    // Both read back inside the transaction: after commit, a concurrent PATCH may already have
    // moved the deployment on, and this answer must show the revision this PATCH made.
    return db.tx(async (c) => {
      // The row stays locked until commit: a concurrent PATCH waits and then plans on this one's result.
      const row = await db.row(`${HOT_QUERIES.deployment} FOR UPDATE`, [id, tenantId], c);
      if (!row) throw new NotFound(`Deployment ID ${id} not found.`);
      const change = plan(toDeployment(row, this.#box));
      const cols = this.#deploymentColumns(change.source_config, change.source_revision_config, change.secrets);
      const updated = await db.row(
        `UPDATE deployments SET source_config = ?, source_revision_config = ?, secrets = ?, deployment_type = ?, build_on_push = ?, repo_ref = ?,
           latest_revision_id = coalesce(?, latest_revision_id), updated_at = ?
         WHERE id = ? RETURNING *`,
        [cols.source_config, cols.source_revision_config, cols.secrets, cols.deployment_type, cols.build_on_push, cols.repo_ref, change.revision?.id ?? null, now, id],
        c,
      );
      if (change.revision) await this.#insertRevision(c, id, tenantId, row.source as string, change.revision, now, sealedIfSame(change.revision.secrets, change.secrets, cols.secrets));
      const revision = change.revision ? await db.row(HOT_QUERIES.revisionById, [change.revision.id], c) : undefined;
      return { deployment: toDeployment(updated!, this.#box), revision: revision ? toRevision(revision) : null };
    });
  }

  async markDeploymentDeleting(tenantId: string, id: string, deleteTracingProject: boolean, now: string): Promise<{ deployment: DeploymentRecord; marked: boolean } | null> {
    const db = this.#db;
    return db.tx(async (c) => {
      const row = await db.row(`${HOT_QUERIES.deployment} FOR UPDATE`, [id, tenantId], c);
      if (!row) return null;
      await db.run('UPDATE deployments SET delete_tracing_project = greatest(delete_tracing_project, ?) WHERE id = ?', [deleteTracingProject ? 1 : 0, id], c);
      // Only one DELETE moves it: concurrent ones see it marked and start no second teardown.
      const marked = (await db.run("UPDATE deployments SET status = 'AWAITING_DELETE', updated_at = ? WHERE id = ? AND status <> 'AWAITING_DELETE'", [now, id], c)) === 1;
      return { deployment: toDeployment((await db.row(HOT_QUERIES.deploymentById, [id], c))!, this.#box), marked };
    });
  }

  async listDeletingDeployments(): Promise<DeploymentRecord[]> {
    const rows = await this.#db.rows("SELECT * FROM deployments WHERE status = 'AWAITING_DELETE'");
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async claimTeardown(deploymentId: string, lease: WorkLease): Promise<boolean> {
    // One conditional UPDATE: the row lock it takes makes two claimants queue, and the second sees the first's owner.
    const claimed = await this.#db.run(
      `UPDATE deployments SET teardown_owner = ?, teardown_lease_expires_at = ?
       WHERE id = ? AND status = 'AWAITING_DELETE' AND (teardown_owner IS NULL OR teardown_owner = ? OR teardown_lease_expires_at < ?)`,
      [lease.owner, lease.until, deploymentId, lease.owner, lease.now],
    );
    return claimed === 1;
  }

  async takeOverTeardowns(lease: WorkLease, limit: number): Promise<DeploymentRecord[]> {
    const free = "status = 'AWAITING_DELETE' AND (teardown_owner IS NULL OR teardown_lease_expires_at < ?)";
    const rows = await this.#db.rows(
      `UPDATE deployments SET teardown_owner = ?, teardown_lease_expires_at = ?
       WHERE id IN (SELECT id FROM deployments WHERE ${free} LIMIT ? FOR UPDATE SKIP LOCKED) AND ${free}
       RETURNING *`,
      [lease.owner, lease.until, lease.now, limit, lease.now],
    );
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async renewTeardownLeases(deploymentIds: readonly string[], lease: WorkLease): Promise<string[]> {
    if (deploymentIds.length === 0) return [];
    const rows = await this.#db.rows<{ id: string }>(
      `UPDATE deployments SET teardown_lease_expires_at = ?
       WHERE id = ANY(?::text[]) AND status = 'AWAITING_DELETE' AND teardown_owner = ?
       RETURNING id`,
      [lease.until, [...deploymentIds], lease.owner],
    );
    return rows.map((row) => row.id);
  }

  async removeDeployment(id: string): Promise<void> {
    const db = this.#db;
    await db.tx(async (c) => {
      const row = await db.row('SELECT delete_tracing_project FROM deployments WHERE id = ? FOR UPDATE', [id], c);
      if (!row) return;
      if (row.delete_tracing_project === 1) {
        await db.run('DELETE FROM tracing_projects WHERE deployment_id = ?', [id], c);
      } else {
        await db.run('UPDATE tracing_projects SET deployment_id = NULL WHERE deployment_id = ?', [id], c);
      }
      await db.run('DELETE FROM revision_logs WHERE revision_id IN (SELECT id FROM revisions WHERE deployment_id = ?)', [id], c);
      await db.run('DELETE FROM revisions WHERE deployment_id = ?', [id], c);
      await db.run('DELETE FROM deployments WHERE id = ?', [id], c);
    });
  }

  async listDeploymentsByRepo(repoUrlKey: string): Promise<DeploymentRecord[]> {
    const rows = await this.#db.rows(HOT_QUERIES.deploymentsByRepo, [repoUrlKey]);
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async listBuildOnPushDeployments(): Promise<DeploymentRecord[]> {
    const rows = await this.#db.rows("SELECT * FROM deployments WHERE build_on_push = 1 AND source = 'github' AND status <> 'AWAITING_DELETE' ORDER BY created_at, rowid");
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async createPushRevision(input: PushRevisionInput): Promise<PushRevisionResult> {
    const db = this.#db;
    const attempt = () =>
      db.tx(async (c): Promise<PushRevisionResult | { outcome: 'created' }> => {
        // Locking the deployment serializes pushes of it; the unique index is the backstop.
        const row = await db.row(`${HOT_QUERIES.deploymentById} FOR UPDATE`, [input.deploymentId], c);
        if (!row) return { outcome: 'not_buildable', reason: 'the deployment no longer exists' };
        if (input.headSeen) await db.run(SET_RECONCILE_HEAD, [input.deploymentId, input.headSeen.repoRef, input.commitSha, input.now], c);
        if (row.status === 'AWAITING_DELETE') return { outcome: 'not_buildable', reason: 'the deployment is being deleted' };
        const existing = await db.row<{ id: string; status: RevisionStatus }>(HOT_QUERIES.revisionOfCommit, [input.deploymentId, input.commitSha], c);
        if (existing) return { outcome: 'exists', revisionId: existing.id, status: existing.status };
        const deployment = toDeployment(row, this.#box);
        const config: SourceRevisionConfig = { ...deployment.source_revision_config, repo_commit_sha: input.commitSha };
        await this.#insertRevision(
          c,
          deployment.id,
          deployment.tenant_id,
          deployment.source,
          { id: input.revisionId, trigger: 'push', source_revision_config: config, secrets: deployment.secrets, resource_spec: deployment.source_config.resource_spec ?? null },
          input.now,
        );
        await db.run('UPDATE deployments SET source_revision_config = ?, latest_revision_id = ?, updated_at = ? WHERE id = ?', [JSON.stringify(config), input.revisionId, input.now, deployment.id], c);
        return { outcome: 'created' };
      });
    let outcome: PushRevisionResult | { outcome: 'created' };
    try {
      outcome = await attempt();
    } catch (error) {
      // Another transaction inserted the commit's revision between our check and insert: answer it.
      if (!isUniqueViolation(error)) throw error;
      outcome = await attempt();
    }
    if (outcome.outcome !== 'created') return outcome;
    return { outcome: 'created', revision: (await this.getRevisionById(input.revisionId))! };
  }

  // ------------------------------------------------------------ revisions and the pipeline

  async getRevision(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord | null> {
    const row = await this.#db.row(HOT_QUERIES.revision, [revisionId, deploymentId, tenantId]);
    return row ? toRevision(row) : null;
  }

  async getRevisionById(revisionId: string): Promise<RevisionRecord | null> {
    const row = await this.#db.row(HOT_QUERIES.revisionById, [revisionId]);
    return row ? toRevision(row) : null;
  }

  async getRevisionWork(revisionId: string): Promise<RevisionWork | null> {
    const row = await this.#db.row(HOT_QUERIES.revisionById, [revisionId]);
    if (!row) return null;
    return {
      ...toRevision(row),
      secrets: this.#box.decryptJson<Secret[]>(row.secrets as string),
      resource_spec: row.resource_spec ? (JSON.parse(row.resource_spec as string) as RevisionWork['resource_spec']) : null,
    };
  }

  async listRevisions(tenantId: string, deploymentId: string, query: RevisionListQuery): Promise<Page<RevisionRecord>> {
    const filtered = query.status && query.status.length > 0;
    const rows = await this.#db.rows(
      `SELECT * FROM revisions WHERE deployment_id = ? AND tenant_id = ? ${filtered ? 'AND status = ANY(?::text[])' : ''}
       ORDER BY seq DESC LIMIT ? OFFSET ?`,
      filtered ? [deploymentId, tenantId, query.status, query.limit, query.offset] : [deploymentId, tenantId, query.limit, query.offset],
    );
    return { resources: rows.map(toRevision), offset: query.offset + rows.length };
  }

  async transitionRevision(change: RevisionTransition, now: string): Promise<RevisionRecord | null> {
    const db = this.#db;
    const applied = await db.tx(async (c) => {
      const changed = await db.run(TRANSITION, [change.to, change.statusMessage ?? null, now, change.revisionId, [...change.from]], c);
      if (changed !== 1) return false;
      if (change.to === 'DEPLOYED') {
        const row = (await db.row(HOT_QUERIES.revisionById, [change.revisionId], c))!;
        await db.run(
          `UPDATE deployments SET active_revision_id = ?, updated_at = ?,
             status = CASE WHEN status = 'AWAITING_DELETE' THEN status ELSE 'READY' END
           WHERE id = ?`,
          [change.revisionId, now, row.deployment_id],
          c,
        );
      }
      for (const log of change.logs ?? []) await this.#insertLog(c, change.revisionId, log, now);
      return true;
    });
    return applied ? this.getRevisionById(change.revisionId) : null;
  }

  async #insertLog(c: Queryable, revisionId: string, log: { type: LogType; level: LogLevel; message: string }, now: string): Promise<void> {
    await this.#db.run('INSERT INTO revision_logs (revision_id, type, level, message, timestamp) VALUES (?, ?, ?, ?, ?)', [revisionId, log.type, log.level, log.message, now], c);
  }

  async startNextRevision(deploymentId: string, firstStage: (revision: RevisionRecord) => RevisionStatus, now: string): Promise<StartNextResult> {
    const db = this.#db;
    // The started revision is read back inside the transaction, as it was started.
    return db.tx(async (c): Promise<StartNextResult> => {
      // The deployment row is the lock of "one revision in progress": two callers cannot both see none.
      const deployment = await db.row(`${HOT_QUERIES.deploymentById} FOR UPDATE`, [deploymentId], c);
      // A deployment being deleted starts nothing new; its teardown interrupts what is queued.
      if (!deployment || deployment.status === 'AWAITING_DELETE') return { started: null, skipped: [] };
      if ((await db.row<{ n: number }>(HOT_QUERIES.inProgressCount, [deploymentId], c))!.n > 0) return { started: null, skipped: [] };
      const [newest, ...older] = await db.rows(HOT_QUERIES.queued, [deploymentId], c);
      if (!newest) return { started: null, skipped: [] };
      const revision = toRevision(newest);
      await db.run(TRANSITION, [firstStage(revision), null, now, revision.id, ['QUEUED']], c);
      for (const row of older) await db.run(TRANSITION, ['SKIPPED', supersededMessage(revision), now, row.id, ['QUEUED']], c);
      const started = toRevision((await db.row(HOT_QUERIES.revisionById, [revision.id], c))!);
      return { started, skipped: older.map((row) => row.id as string) };
    });
  }

  async listUnfinishedRevisions(): Promise<RevisionRecord[]> {
    const rows = await this.#db.rows(`SELECT * FROM revisions WHERE status NOT IN (${TERMINAL}) ORDER BY seq`);
    return rows.map(toRevision);
  }

  async takeOverRevisions(lease: WorkLease, staleBefore: string, limit: number): Promise<Array<Pick<RevisionRecord, 'id' | 'deployment_id'>>> {
    const db = this.#db;
    const running = `status NOT IN (${TERMINAL}) AND status <> 'QUEUED'`;
    return db.tx(async (c) => {
      if ((await db.run(RENEW_LIVE_PROCESS_LEASE, [lease.until, lease.owner, lease.now], c)) === 0) return [];
      // An expired lease locked, its revisions are this sweep's alone (another sweep skips it); the
      // process itself, renewing meanwhile, waits, then finds it expired (or gone) and re-checks
      // what it holds; a sweep after this one sees the revisions taken here as a live process's.
      const dead = await db.rows<{ process_id: string }>(
        'SELECT process_id FROM process_leases WHERE lease_expires_at < ? AND process_id <> ? ORDER BY process_id FOR UPDATE SKIP LOCKED',
        [lease.now, lease.owner],
        c,
      );
      const taken: Array<Pick<RevisionRecord, 'id' | 'deployment_id'>> = [];
      for (const { process_id: deadId } of dead) {
        const wanted = limit - taken.length;
        if (wanted <= 0) break;
        // The locked rows picked once, in a CTE: as `seq IN (… LIMIT n)` the subquery may be run
        // again per row and more than n be taken.
        const rows = await db.rows<Pick<RevisionRecord, 'id' | 'deployment_id'>>(
          `WITH picked AS (SELECT seq FROM revisions WHERE runner_id = ? AND ${running} LIMIT ? FOR UPDATE)
           UPDATE revisions SET runner_id = ? FROM picked
           WHERE revisions.seq = picked.seq AND revisions.runner_id = ? AND revisions.${running}
           RETURNING revisions.id, revisions.deployment_id`,
          [deadId, wanted, lease.owner, deadId],
          c,
        );
        taken.push(...rows);
        if (rows.length < wanted) await db.run('DELETE FROM process_leases WHERE process_id = ?', [deadId], c);
      }
      if (taken.length >= limit) return taken;
      // Never held: SKIP LOCKED, so two sweeps take disjoint ones; the outer condition is checked
      // again on the locked row, so one another sweep took meanwhile is not taken twice.
      const unheld = `runner_id IS NULL AND ${running} AND updated_at < ?`;
      taken.push(...(await db.rows<Pick<RevisionRecord, 'id' | 'deployment_id'>>(
        `WITH picked AS (SELECT seq FROM revisions WHERE ${unheld} LIMIT ? FOR UPDATE SKIP LOCKED)
         UPDATE revisions SET runner_id = ? FROM picked
         WHERE revisions.seq = picked.seq AND revisions.${unheld}
         RETURNING revisions.id, revisions.deployment_id`,
        [staleBefore, limit - taken.length, lease.owner, staleBefore],
        c,
      )));
      return taken;
    });
  }

  async renewProcessLease(lease: WorkLease): Promise<boolean> {
    const renewed = await this.#db.run(RENEW_LIVE_PROCESS_LEASE, [lease.until, lease.owner, lease.now]);
    if (renewed === 1) return true;
    await this.#db.run(
      'INSERT INTO process_leases (process_id, lease_expires_at) VALUES (?, ?) ON CONFLICT (process_id) DO UPDATE SET lease_expires_at = excluded.lease_expires_at',
      [lease.owner, lease.until],
    );
    return false;
  }

  async endProcessLease(owner: string, now: string): Promise<void> {
    await this.#db.run('UPDATE process_leases SET lease_expires_at = ? WHERE process_id = ?', [now, owner]);
  }

  async holdRevisions(ids: readonly string[], owner: string): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.#db.rows<{ id: string }>(
      // FOR SHARE: a sweep deleting this process's row (it found it expired) is waited for, and then
      // nothing is held, so a revision never names a process with no row.
      `UPDATE revisions SET runner_id = ?
       WHERE id = ANY(?::text[]) AND status NOT IN (${TERMINAL}) AND (runner_id = ? OR runner_id IS NULL)
         AND EXISTS (SELECT 1 FROM process_leases WHERE process_id = ? FOR SHARE)
       RETURNING id`,
      [owner, [...ids], owner, owner],
    );
    return rows.map((row) => row.id);
  }

  async releaseRevisions(ids: readonly string[], owner: string): Promise<void> {
    if (ids.length > 0) await this.#db.run('UPDATE revisions SET runner_id = NULL WHERE id = ANY(?::text[]) AND runner_id = ?', [[...ids], owner]);
  }

  async listStalledQueuedDeployments(): Promise<string[]> {
    const rows = await this.#db.rows<{ deployment_id: string }>(LEASE_QUERIES.stalledQueuedDeployments);
    return rows.map((row) => row.deployment_id);
  }

  async appendLogs(revisionId: string, entries: Array<{ type: LogType; level: LogLevel; message: string }>, now: string): Promise<void> {
    if (entries.length === 0) return;
    await this.#db.tx(async (c) => {
      for (const entry of entries) await this.#insertLog(c, revisionId, entry, now);
    });
  }

  async readLogs(revisionId: string, type: LogType, afterSeq: number, limit: number): Promise<{ logs: LogEntry[]; lastSeq: number | null; more: boolean }> {
    const rows = await this.#db.rows<{ seq: number; timestamp: string; level: LogLevel; message: string }>(HOT_QUERIES.readLogs, [revisionId, type, afterSeq, limit + 1]);
    const page = rows.slice(0, limit);
    return {
      logs: page.map(({ timestamp, level, message }) => ({ timestamp, level, message })),
      lastSeq: page.at(-1)?.seq ?? null,
      more: rows.length > limit,
    };
  }

  async searchLogs(revisionId: string, filter: LogFilter): Promise<{ logs: Array<LogEntry & { seq: number }>; more: boolean }> {
    const where = ['revision_id = ?', 'type = ?'];
    const values: unknown[] = [revisionId, filter.type];
    if (filter.cursor > 0) {
      where.push(filter.order === 'asc' ? 'seq > ?' : 'seq < ?');
      values.push(filter.cursor);
    }
    if (filter.level) {
      where.push('level = ?');
      values.push(filter.level);
    }
    if (filter.query) {
      where.push("message ILIKE ? ESCAPE '\\'");
      values.push(`%${escapeLike(filter.query)}%`);
    }
    if (filter.startTime) {
      where.push('timestamp >= ?');
      values.push(filter.startTime);
    }
    if (filter.endTime) {
      where.push('timestamp <= ?');
      values.push(filter.endTime);
    }
    values.push(filter.limit + 1);
    const rows = await this.#db.rows<LogEntry & { seq: number }>(
      `SELECT seq, timestamp, level, message FROM revision_logs WHERE ${where.join(' AND ')} ORDER BY seq ${filter.order === 'asc' ? 'ASC' : 'DESC'} LIMIT ?`,
      values,
    );
    return { logs: rows.slice(0, filter.limit), more: rows.length > filter.limit };
  }

  // ------------------------------------------------------------ listeners

  async createListener(input: Listener): Promise<void> {
    try {
      await this.#db.run(
        `INSERT INTO listeners (id, tenant_id, version, compute_type, compute_id, compute_config, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        [input.id, input.tenant_id, input.version ?? null, input.compute_type, input.compute_id, JSON.stringify(input.compute_config), input.created_at, input.updated_at],
      );
    } catch (error) {
      if (isUniqueViolation(error)) throw new Conflict(`A listener with compute_id '${input.compute_id}' already exists in this workspace.`);
      throw error;
    }
  }

  async getListener(tenantId: string, id: string): Promise<ListenerRecord | null> {
    const row = await this.#db.row('SELECT * FROM listeners WHERE id = ? AND tenant_id = ?', [id, tenantId]);
    return row ? toListener(row) : null;
  }

  async servingComputeType(tenantId: string, listenerId: string | null): Promise<ComputeType | null> {
    const row = await this.#db.row<{ compute_type: ComputeType }>(HOT_QUERIES.servingComputeType, [tenantId, listenerId, tenantId]);
    return row?.compute_type ?? null;
  }

  async getListenerById(id: string): Promise<ListenerRecord | null> {
    const row = await this.#db.row('SELECT * FROM listeners WHERE id = ?', [id]);
    return row ? toListener(row) : null;
  }

  async listListeners(tenantId: string, limit: number, offset: number): Promise<Page<ListenerRecord>> {
    const rows = await this.#db.rows('SELECT * FROM listeners WHERE tenant_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?', [tenantId, limit, offset]);
    return { resources: rows.map(toListener), offset: offset + rows.length };
  }

  async updateListener(tenantId: string, id: string, computeConfig: ComputeConfig, now: string, version?: string | null): Promise<ListenerRecord | null> {
    const changed = await this.#db.run('UPDATE listeners SET compute_config = ?, version = coalesce(?, version), updated_at = ? WHERE id = ? AND tenant_id = ?', [
      JSON.stringify(computeConfig),
      version ?? null,
      now,
      id,
      tenantId,
    ]);
    return changed === 1 ? this.getListener(tenantId, id) : null;
  }

  async deleteListener(tenantId: string, id: string): Promise<'deleted' | 'not_found' | 'in_use'> {
    const db = this.#db;
    return db.tx(async (c) => {
      if (!(await db.row('SELECT 1 FROM listeners WHERE id = ? AND tenant_id = ? FOR UPDATE', [id, tenantId], c))) return 'not_found';
      if (await db.row('SELECT 1 FROM deployments WHERE listener_id = ? LIMIT 1', [id], c)) return 'in_use';
      await db.run('DELETE FROM listeners WHERE id = ?', [id], c);
      return 'deleted';
    });
  }

  // ------------------------------------------------------------ GitHub integrations

  async createIntegration(input: IntegrationRecord): Promise<void> {
    const db = this.#db;
    try {
      await db.tx(async (c) => {
        // One installation, one organization: links of one installation are made one at a time.
        await c.query("SELECT pg_advisory_xact_lock(hashtextextended('control-plane:installation:' || $1::text, 0))", [String(input.installation_id)]);
        const owner = await db.row(
          `SELECT w.organization_id FROM github_integrations g JOIN workspaces w ON w.id = g.tenant_id
           WHERE g.installation_id = ? AND w.organization_id <> (SELECT organization_id FROM workspaces WHERE id = ?) LIMIT 1`,
          [input.installation_id, input.tenant_id],
          c,
        );
        if (owner) throw new Conflict(`Installation ${input.installation_id} is linked to another organization.`);
        await db.run('INSERT INTO github_integrations (id, tenant_id, installation_id, name, suspended_at, created_at) VALUES (?, ?, ?, ?, NULL, ?)', [
          input.id,
          input.tenant_id,
          input.installation_id,
          input.name,
          input.created_at,
        ], c);
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new Conflict(`Installation ${input.installation_id} is already linked to this workspace.`);
      throw error;
    }
  }

  async getIntegration(tenantId: string, id: string): Promise<IntegrationRecord | null> {
    const row = await this.#db.row('SELECT * FROM github_integrations WHERE id = ? AND tenant_id = ?', [id, tenantId]);
    return row ? toIntegration(row) : null;
  }

  async listIntegrations(tenantId: string): Promise<IntegrationRecord[]> {
    return (await this.#db.rows('SELECT * FROM github_integrations WHERE tenant_id = ? ORDER BY created_at, rowid', [tenantId])).map(toIntegration);
  }

  async deleteIntegration(tenantId: string, id: string): Promise<boolean> {
    return (await this.#db.run('DELETE FROM github_integrations WHERE id = ? AND tenant_id = ?', [id, tenantId])) === 1;
  }

  async getIntegrationById(id: string): Promise<IntegrationRecord | null> {
    const row = await this.#db.row('SELECT * FROM github_integrations WHERE id = ?', [id]);
    return row ? toIntegration(row) : null;
  }

  async removeInstallation(installationId: number): Promise<IntegrationRecord[]> {
    const rows = await this.#db.rows('DELETE FROM github_integrations WHERE installation_id = ? RETURNING *', [installationId]);
    return rows.sort((a, b) => (a.rowid as number) - (b.rowid as number)).map(toIntegration);
  }

  async setInstallationSuspended(installationId: number, suspendedAt: string | null): Promise<IntegrationRecord[]> {
    const rows = await this.#db.rows('UPDATE github_integrations SET suspended_at = ? WHERE installation_id = ? RETURNING *', [suspendedAt, installationId]);
    return rows.sort((a, b) => (a.rowid as number) - (b.rowid as number)).map(toIntegration);
  }

  // ------------------------------------------------------------ tracing projects

  async getTracingProject(tenantId: string, id: string): Promise<TracingProject | null> {
    const row = await this.#db.row('SELECT * FROM tracing_projects WHERE id = ? AND tenant_id = ?', [id, tenantId]);
    return row ? toTracingProject(row) : null;
  }

  async listTracingProjects(tenantId: string, name: string | undefined, limit: number, offset: number): Promise<Page<TracingProject>> {
    const rows = await this.#db.rows(
      `SELECT * FROM tracing_projects WHERE tenant_id = ? AND (?::text IS NULL OR name = ?)
       ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?`,
      [tenantId, name ?? null, name ?? null, limit, offset],
    );
    return { resources: rows.map(toTracingProject), offset: offset + rows.length };
  }
}

/** Why a queued revision was skipped (the SQLite store's words). */
function supersededMessage(newer: RevisionRecord): string {
  const sha = newer.source_revision_config.repo_commit_sha;
  if (newer.trigger === 'push' && sha) {
    return `Superseded by revision ${newer.id} (push of commit ${sha.slice(0, 12)}), which was created later: only the newest queued revision is built.`;
  }
  return `Superseded by revision ${newer.id}, which was created later.`;
}

