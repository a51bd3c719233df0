import { normalizeRepoUrl } from '../../shared/repo-url.ts';
import type { ApiKey } from '../../shared/schemas/api-key.ts';
import type { DeploymentListQuery, SourceConfig, SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { ComputeConfig, ComputeType, Listener } from '../../shared/schemas/listener.ts';
import type { LogEntry, LogFilter, LogLevel, LogType, RevisionListQuery, RevisionStatus } from '../../shared/schemas/revision.ts';
import type { Secret } from '../../shared/schemas/secret.ts';
import type { TracingProject } from '../../shared/schemas/tracing-project.ts';
import type { Workspace } from '../../shared/schemas/workspace.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { currentTraceparent, machineAuditEntry } from '../lib/request-scope.ts';
import { auditInsert } from './audit.ts';
import type { Db, Params } from './db.ts';
import { escapeLike } from './dialect.ts';
import { hotQueries, SET_RECONCILE_HEAD } from './queries/hot-paths.ts';
import { leaseQueries } from './queries/leases.ts';
import { TERMINAL } from './queries/statuses.ts';
import { type Row, sealedIfSame, toApiKey, toDeployment, toIntegration, toListener, toRevision, toTracingProject, toWorkspace } from './rows.ts';
import { NO_RULES, type StartRules, type StoreRules } from './rules.ts';
import { SqlStore } from './sql-store.ts';
import type {
  ApiKeyRecord,
  BootstrapResult,
  CreatedDeployment,
  DeploymentChange,
  DeploymentRecord,
  IntegrationRecord,
  ListenerRecord,
  MachineChange,
  NewDeployment,
  NewRevision,
  Page,
  PushRevisionInput,
  PushRevisionResult,
  RevisionLogCap,
  RevisionRecord,
  RevisionRunner,
  RevisionTransition,
  RevisionWork,
  StartNextResult,
  Store,
  WorkLease,
} from './types.ts';

/** One statement of a write, as `createStatements` lists them. */
export type Statement = { sql: string; params: Params };

const SANDBOX_LISTENER = `INSERT INTO listeners (id, tenant_id, compute_type, compute_id, compute_config, created_at, updated_at)
  VALUES (?, ?, 'sandbox', 'sandbox', '{"k8s_namespaces":[]}', ?, ?)`;
const INSERT_LOG = 'INSERT INTO revision_logs (revision_id, type, level, message, timestamp) VALUES (?, ?, ?, ?, ?)';
const LAST_LOG_TIMESTAMP = 'SELECT timestamp FROM revision_logs WHERE revision_id = ? AND type = ? ORDER BY seq DESC LIMIT 1';
/**
 * A new deployment takes over the tracing project its name left behind (a deployment deleted
 * without `delete_tracing_project`): the name is free again and its traces go on in the same project
 * (docs/decisions/deleted-deployment-names.md). Otherwise a new project is inserted; one of that name
 * still belonging to a deployment makes the insert a unique violation (409).
 */
const ADOPT_ORPHANED_TRACING_PROJECT = 'UPDATE tracing_projects SET deployment_id = ? WHERE tenant_id = ? AND name = ? AND deployment_id IS NULL';
const INSERT_TRACING_PROJECT = `INSERT INTO tracing_projects (id, tenant_id, name, deployment_id, created_at)
  SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT)
  WHERE NOT EXISTS (SELECT 1 FROM tracing_projects WHERE tenant_id = ? AND name = ? AND deployment_id = ?)`;
const INSERT_DEPLOYMENT = `INSERT INTO deployments (id, tenant_id, name, source, source_config, source_revision_config, secrets, status,
    latest_revision_id, active_revision_id, image_version, deployment_type, integration_id, listener_id,
    repo_url_key, repo_ref, build_on_push, created_at, updated_at)
  VALUES (@id, @tenant_id, @name, @source, @source_config, @source_revision_config, @secrets, @status,
    @latest_revision_id, NULL, @image_version, @deployment_type, @integration_id, @listener_id,
    @repo_url_key, @repo_ref, @build_on_push, @created_at, @updated_at)`;

/** A deployment's JSON and query columns, as `deploymentColumns` derives them. */
type DeploymentColumns = {
  source_config: string;
  source_revision_config: string;
  secrets: string;
  deployment_type: SourceConfig['deployment_type'];
  build_on_push: 0 | 1;
  repo_ref: string | null;
};

/**
 * Tenancy, keys, deployments, revisions, logs, listeners, integrations and tracing projects, on
 * either database. Every method is one transaction; read-modify-write methods lock the deployment
 * row they start from (`forUpdate`), which serializes them per deployment on PostgreSQL as
 * SQLite's single writer does.
 */
export class CoreStore extends SqlStore implements Store {
  protected readonly box: SecretBox;
  protected readonly hot: ReturnType<typeof hotQueries>;
  protected readonly lease: ReturnType<typeof leaseQueries>;

  constructor(db: Db, box: SecretBox, rules: StoreRules = NO_RULES) {
    super(db, rules);
    this.box = box;
    this.hot = hotQueries(db.dialect);
    this.lease = leaseQueries(db.dialect);
  }

  close(): void {}

  async ping(): Promise<boolean> {
    return (await this.sql.row<{ ok: number }>('SELECT 1 AS ok'))?.ok === 1;
  }

  /**
   * A real write that tells whether the database takes writes now: one committed transaction that
   * inserts a row large enough to need fresh pages (a full disk, or a database at its page limit,
   * refuses it) and deletes it again, so the commit reaches the disk (a read-only database, an I/O
   * error or a lock held past the busy timeout fail it). The row lives in `schema_migrations` under
   * a version no migration uses (-1) and never outlives the transaction.
   */
  async probeWrite(): Promise<void> {
    await this.sql.tx(async (tx) => {
      await tx.run('DELETE FROM schema_migrations WHERE version = -1');
      await tx.run(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (-1, ${this.sql.dialect.pageFiller}, 'readiness probe')`);
      await tx.run('DELETE FROM schema_migrations WHERE version = -1');
    });
  }

  // ------------------------------------------------------------ tenancy and keys

  async bootstrap(input: { keyHash: string | null; keyId: string; now: string }): Promise<BootstrapResult> {
    return this.sql.tx(async (tx) => {
      // Two processes bootstrapping together create one organization and one workspace.
      await tx.dialect.serialize(tx, 'bootstrap');
      const wasEmpty = (await tx.row<{ n: number }>('SELECT count(*) AS n FROM api_keys'))!.n === 0;
      let org = await tx.row<{ id: string }>("SELECT id FROM organizations WHERE name = 'default'");
      if (!org) {
        org = { id: crypto.randomUUID() };
        await tx.run("INSERT INTO organizations (id, name, created_at) VALUES (?, 'default', ?)", [org.id, input.now]);
      }
      let ws = await tx.row<{ id: string }>('SELECT id FROM workspaces WHERE organization_id = ? AND is_default = 1', [org.id]);
      if (!ws) {
        ws = { id: crypto.randomUUID() };
        await tx.run("INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, 'default', 1, ?)", [ws.id, org.id, input.now]);
        await tx.run(SANDBOX_LISTENER, [crypto.randomUUID(), ws.id, input.now, input.now]);
      }
      if (input.keyHash) {
        await tx.run(
          `INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at)
           VALUES (?, ?, NULL, ?, 'bootstrap key', ?)
           ON CONFLICT (key_hash) DO UPDATE SET revoked_at = NULL`,
          [input.keyId, org.id, input.keyHash, input.now],
        );
      }
      return { organizationId: org.id, workspaceId: ws.id, wasEmpty };
    });
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const row = await this.sql.row(this.hot.apiKeyByHash, [keyHash]);
    return row ? { ...toApiKey(row), revoked: row.revoked_at !== null, key_hash: row.key_hash as string } : null;
  }

  async createApiKey(input: ApiKey & { key_hash: string }): Promise<void> {
    await this.sql.run('INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at) VALUES (?, ?, ?, ?, ?, ?)', [
      input.id,
      input.organization_id,
      input.workspace_id,
      input.key_hash,
      input.description,
      input.created_at,
    ]);
  }

  async listApiKeys(organizationId: string): Promise<ApiKey[]> {
    const rows = await this.sql.rows('SELECT * FROM api_keys WHERE organization_id = ? AND revoked_at IS NULL ORDER BY created_at DESC, rowid DESC', [
      organizationId,
    ]);
    return rows.map(toApiKey);
  }

  async revokeApiKey(organizationId: string, id: string, now: string): Promise<boolean> {
    return (
      (await this.sql.run('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND organization_id = ? AND revoked_at IS NULL', [now, id, organizationId])) === 1
    );
  }

  async getWorkspace(id: string): Promise<(Workspace & { is_default: boolean }) | null> {
    const row = await this.sql.row('SELECT * FROM workspaces WHERE id = ?', [id]);
    return row ? { ...toWorkspace(row), is_default: row.is_default === 1 } : null;
  }

  async getDefaultWorkspace(organizationId: string): Promise<Workspace | null> {
    // Inline, not through `first`: this is a hot path's read.
    const row = await this.sql.row(this.hot.defaultWorkspace, [organizationId]);
    return row ? toWorkspace(row) : null;
  }

  async createWorkspace(input: Workspace): Promise<void> {
    await this.refusingDuplicate({ kind: 'workspace_name_taken', name: input.name }, async () => {
      await this.sql.tx(async (tx) => {
        await tx.run('INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, ?, 0, ?)', [
          input.id,
          input.organization_id,
          input.name,
          input.created_at,
        ]);
        // Every workspace can deploy to the sandbox from its first minute, as the default one can.
        await tx.run(SANDBOX_LISTENER, [crypto.randomUUID(), input.id, input.created_at, input.created_at]);
      });
    });
  }

  async listWorkspaces(organizationId: string): Promise<Workspace[]> {
    const rows = await this.sql.rows('SELECT * FROM workspaces WHERE organization_id = ? ORDER BY created_at, rowid', [organizationId]);
    return rows.map(toWorkspace);
  }

  // ------------------------------------------------------------ deployments

  async createDeployment(input: NewDeployment): Promise<CreatedDeployment> {
    const statements = this.createStatements(input);
    let revisionHeld = false;
    try {
      await this.sql.tx(async (tx) => {
        for (const statement of statements) {
          if (statement === statements.revision)
            revisionHeld = (await tx.row<{ runner_id: string | null }>(statement.sql, statement.params))!.runner_id !== null;
          else await tx.run(statement.sql, statement.params);
        }
      });
    } catch (error) {
      throw this.createRefused(input, error);
    }
    // What was written, as written: no need to read it back and decrypt it again.
    return { deployment: { ...input.deployment, delete_tracing_project: false }, revisionHeld };
  }

  /**
   * The rows of a create, in order, as one list both write paths run: PostgreSQL's transaction and
   * SQLite's grouped commit. `revision` is the statement whose RETURNING says whether the revision
   * names its runner.
   */
  protected createStatements(input: NewDeployment): Statement[] & { revision?: Statement } {
    const { deployment: d, revision, tracingProject: tp, runner } = input;
    const cols = this.deploymentColumns(d.source_config, d.source_revision_config, d.secrets);
    const statements: Statement[] & { revision?: Statement } = [
      {
        sql: INSERT_DEPLOYMENT,
        params: {
          id: d.id,
          tenant_id: d.tenant_id,
          name: d.name,
          source: d.source,
          ...cols,
          status: d.status,
          latest_revision_id: revision?.id ?? null,
          image_version: d.image_version,
          integration_id: d.source_config.integration_id,
          listener_id: d.source_config.listener_id,
          repo_url_key: d.source_config.repo_url ? normalizeRepoUrl(d.source_config.repo_url) : null,
          created_at: d.created_at,
          updated_at: d.updated_at,
        },
      },
    ];
    if (revision) {
      const insert = this.revisionStatements(
        d.id,
        d.tenant_id,
        d.source,
        revision,
        d.created_at,
        sealedIfSame(revision.secrets, d.secrets, cols.secrets),
        runner,
      );
      statements.revision = insert[0];
      statements.push(...insert);
    }
    statements.push(
      { sql: ADOPT_ORPHANED_TRACING_PROJECT, params: [tp.deployment_id, tp.tenant_id, tp.name] },
      { sql: INSERT_TRACING_PROJECT, params: [tp.id, tp.tenant_id, tp.name, tp.deployment_id, tp.created_at, tp.tenant_id, tp.name, tp.deployment_id] },
    );
    return statements;
  }

  /** A create's failure as the caller should see it: a name taken is the domain's refusal. */
  protected createRefused(input: NewDeployment, error: unknown): unknown {
    return this.sql.dialect.isUniqueViolation(error) ? this.rules.refusal({ kind: 'deployment_name_taken', name: input.deployment.name }) : error;
  }

  /** The JSON and query columns derived from a deployment's current config. */
  protected deploymentColumns(sourceConfig: SourceConfig, revisionConfig: SourceRevisionConfig, secrets: Secret[]): DeploymentColumns {
    return {
      source_config: JSON.stringify(sourceConfig),
      source_revision_config: JSON.stringify(revisionConfig),
      secrets: this.box.encryptJson(secrets),
      deployment_type: sourceConfig.deployment_type,
      build_on_push: sourceConfig.build_on_push ? 1 : 0,
      repo_ref: revisionConfig.repo_ref,
    };
  }

  /**
   * A new revision and the log lines written with it; the first statement answers `runner_id`.
   * `sealedSecrets`: the revision's secrets already encrypted (the deployment's, in the same write).
   */
  protected revisionStatements(
    deploymentId: string,
    tenantId: string,
    source: string,
    revision: NewRevision,
    now: string,
    sealedSecrets?: string,
    runner?: RevisionRunner,
  ): Statement[] {
    return [
      {
        sql: this.hot.insertRevision,
        params: {
          id: revision.id,
          deployment_id: deploymentId,
          tenant_id: tenantId,
          status: revision.status ?? 'QUEUED',
          status_message: revision.status_message ?? null,
          source,
          source_revision_config: JSON.stringify(revision.source_revision_config),
          commit_sha: revision.source_revision_config.repo_commit_sha ?? null,
          secrets: sealedSecrets ?? this.box.encryptJson(revision.secrets),
          resource_spec: revision.resource_spec ? JSON.stringify(revision.resource_spec) : null,
          trigger: revision.trigger,
          // The trace context of the work that makes it (a request, a delivery): see `RequestScope.traceparent`.
          traceparent: revision.traceparent ?? currentTraceparent() ?? null,
          now,
          runner: runner?.owner ?? null,
          runner_now: runner?.now ?? null,
        },
      },
      ...(revision.logs ?? []).map((log) => ({ sql: INSERT_LOG, params: [revision.id, log.type, log.level, log.message, now] })),
    ];
  }

  /** The audit entry of a change no API key made (a GitHub delivery's), written in the change's transaction `tx`. */
  async #auditInTx(tx: Db, workspaceId: string, change: MachineChange, action: string, resourceType: string, resourceId: string): Promise<void> {
    const workspace = await tx.row<{ organization_id: string }>('SELECT organization_id FROM workspaces WHERE id = ?', [workspaceId]);
    if (!workspace) return;
    const entry = machineAuditEntry({
      actor: change.actor,
      organizationId: workspace.organization_id,
      workspaceId,
      action,
      resourceType,
      resourceId,
      now: change.now,
    });
    const { sql, params } = auditInsert(entry);
    await tx.run(sql, params);
  }

  async #insertRevision(tx: Db, ...args: Parameters<CoreStore['revisionStatements']>): Promise<void> {
    for (const statement of this.revisionStatements(...args)) await tx.run(statement.sql, statement.params);
  }

  async getDeployment(tenantId: string, id: string): Promise<DeploymentRecord | null> {
    const row = await this.sql.row(this.hot.deployment, [id, tenantId]);
    return row ? toDeployment(row, this.box) : null;
  }

  async getDeploymentById(id: string): Promise<DeploymentRecord | null> {
    const row = await this.sql.row(this.hot.deploymentById, [id]);
    return row ? toDeployment(row, this.box) : null;
  }

  async listDeployments(tenantId: string, query: DeploymentListQuery): Promise<Page<DeploymentRecord>> {
    const { dialect } = this.sql;
    const where = ['tenant_id = @tenant_id'];
    const params: Row = { tenant_id: tenantId, limit: query.limit, offset: query.offset };
    if (query.name_contains) {
      where.push(`name ${dialect.likeIgnoringCase} @name ESCAPE '\\'`);
      params.name = `%${escapeLike(query.name_contains)}%`;
    }
    if (query.status) {
      where.push('status = @status');
      params.status = query.status;
    }
    if (query.deployment_type) {
      where.push('deployment_type = @deployment_type');
      params.deployment_type = query.deployment_type;
    }
    if (query.image_version) {
      where.push('image_version = @image_version');
      params.image_version = query.image_version;
    }
    if (query.deployment_ids) {
      where.push(dialect.inList('id', '@ids'));
      params.ids = dialect.list(query.deployment_ids);
    }
    const rows = await this.sql.rows(
      `SELECT * FROM deployments WHERE ${where.join(' AND ')} ORDER BY created_at DESC, rowid DESC LIMIT @limit OFFSET @offset`,
      params,
    );
    return { resources: rows.map((row) => toDeployment(row, this.box)), offset: query.offset + rows.length };
  }

  async updateDeployment(
    tenantId: string,
    id: string,
    plan: (current: DeploymentRecord) => DeploymentChange,
    now: string,
  ): Promise<{ deployment: DeploymentRecord; revision: RevisionRecord | null }> {
    // Both read back inside the transaction: after commit, a concurrent PATCH may already have
    // moved the deployment on, and this answer must show the revision this PATCH made.
    return this.sql.tx(async (tx) => {
      // The row stays locked until commit: a concurrent PATCH waits and then plans on this one's result.
      const row = await tx.row(`${this.hot.deployment}${tx.dialect.forUpdate}`, [id, tenantId]);
      if (!row) throw this.rules.refusal({ kind: 'deployment_not_found', id });
      const change = plan(toDeployment(row, this.box));
      const cols = this.deploymentColumns(change.source_config, change.source_revision_config, change.secrets);
      await tx.run(
        `UPDATE deployments SET source_config = @source_config, source_revision_config = @source_revision_config,
           secrets = @secrets, deployment_type = @deployment_type, build_on_push = @build_on_push, repo_ref = @repo_ref,
           latest_revision_id = coalesce(@latest_revision_id, latest_revision_id), updated_at = @now
         WHERE id = @id`,
        { id, now, latest_revision_id: change.revision?.id ?? null, ...cols },
      );
      if (change.revision)
        await this.#insertRevision(
          tx,
          id,
          tenantId,
          row.source as string,
          change.revision,
          now,
          sealedIfSame(change.revision.secrets, change.secrets, cols.secrets),
        );
      const updated = await tx.row(this.hot.deploymentById, [id]);
      const revision = change.revision ? await tx.row(this.hot.revisionById, [change.revision.id]) : undefined;
      return { deployment: toDeployment(updated!, this.box), revision: revision ? toRevision(revision) : null };
    });
  }

  async markDeploymentDeleting(
    tenantId: string,
    id: string,
    deleteTracingProject: boolean,
    now: string,
  ): Promise<{ deployment: DeploymentRecord; marked: boolean } | null> {
    return this.sql.tx(async (tx) => {
      const row = await tx.row(`${this.hot.deployment}${tx.dialect.forUpdate}`, [id, tenantId]);
      if (!row) return null;
      // Once asked for, the tracing project's deletion stays asked for.
      if (deleteTracingProject) await tx.run('UPDATE deployments SET delete_tracing_project = 1 WHERE id = ?', [id]);
      // Only one DELETE moves it: concurrent ones see it marked and start no second teardown.
      const marked =
        (await tx.run("UPDATE deployments SET status = 'AWAITING_DELETE', updated_at = ? WHERE id = ? AND status <> 'AWAITING_DELETE'", [now, id])) === 1;
      return { deployment: toDeployment((await tx.row(this.hot.deploymentById, [id]))!, this.box), marked };
    });
  }

  async listDeletingDeployments(): Promise<DeploymentRecord[]> {
    const rows = await this.sql.rows("SELECT * FROM deployments WHERE status = 'AWAITING_DELETE'");
    return rows.map((row) => toDeployment(row, this.box));
  }

  async claimTeardown(deploymentId: string, lease: WorkLease): Promise<boolean> {
    // One conditional UPDATE: the row lock it takes makes two claimants queue, and the second sees the first's owner.
    const claimed = await this.sql.run(
      `UPDATE deployments SET teardown_owner = @owner, teardown_lease_expires_at = @until
       WHERE id = @id AND status = 'AWAITING_DELETE' AND (teardown_owner IS NULL OR teardown_owner = @owner OR teardown_lease_expires_at < @now)`,
      { id: deploymentId, owner: lease.owner, until: lease.until, now: lease.now },
    );
    return claimed === 1;
  }

  async takeOverTeardowns(lease: WorkLease, limit: number): Promise<DeploymentRecord[]> {
    const rows = await this.sql.rows(this.lease.takeOverTeardowns, { owner: lease.owner, until: lease.until, now: lease.now, limit });
    return rows.map((row) => toDeployment(row, this.box));
  }

  async renewTeardownLeases(deploymentIds: readonly string[], lease: WorkLease): Promise<string[]> {
    if (deploymentIds.length === 0) return [];
    const rows = await this.sql.rows<{ id: string }>(this.lease.renewTeardownLeases, {
      owner: lease.owner,
      until: lease.until,
      ids: this.sql.dialect.list(deploymentIds),
    });
    return rows.map((row) => row.id);
  }

  async removeDeployment(id: string): Promise<void> {
    await this.sql.tx(async (tx) => {
      const row = await tx.row(`SELECT delete_tracing_project FROM deployments WHERE id = ?${tx.dialect.forUpdate}`, [id]);
      if (!row) return;
      if (row.delete_tracing_project === 1) {
        await tx.run('DELETE FROM tracing_projects WHERE deployment_id = ?', [id]);
      } else {
        await tx.run('UPDATE tracing_projects SET deployment_id = NULL WHERE deployment_id = ?', [id]);
      }
      await tx.run('DELETE FROM revision_logs WHERE revision_id IN (SELECT id FROM revisions WHERE deployment_id = ?)', [id]);
      await tx.run('DELETE FROM revisions WHERE deployment_id = ?', [id]);
      await tx.run('DELETE FROM deployments WHERE id = ?', [id]);
    });
  }

  async listDeploymentsByRepo(repoUrlKey: string): Promise<DeploymentRecord[]> {
    const rows = await this.sql.rows(this.hot.deploymentsByRepo, [repoUrlKey]);
    return rows.map((row) => toDeployment(row, this.box));
  }

  async listBuildOnPushDeployments(): Promise<DeploymentRecord[]> {
    const rows = await this.sql.rows(
      "SELECT * FROM deployments WHERE build_on_push = 1 AND source = 'github' AND status <> 'AWAITING_DELETE' ORDER BY created_at, rowid",
    );
    return rows.map((row) => toDeployment(row, this.box));
  }

  async createPushRevision(input: PushRevisionInput): Promise<PushRevisionResult> {
    const attempt = () =>
      this.sql.tx(async (tx): Promise<PushRevisionResult | { outcome: 'created' }> => {
        // Locking the deployment serializes pushes of it; the unique index is the backstop.
        const row = await tx.row(`${this.hot.deploymentById}${tx.dialect.forUpdate}`, [input.deploymentId]);
        if (!row) return { outcome: 'not_buildable', reason: 'the deployment no longer exists' };
        if (input.headSeen) await tx.run(SET_RECONCILE_HEAD, [input.deploymentId, input.headSeen.repoRef, input.commitSha, input.now]);
        if (row.status === 'AWAITING_DELETE') return { outcome: 'not_buildable', reason: 'the deployment is being deleted' };
        const existing = await tx.row<{ id: string; status: RevisionStatus }>(this.hot.revisionOfCommit, [input.deploymentId, input.commitSha]);
        if (existing) return { outcome: 'exists', revisionId: existing.id, status: existing.status };
        const deployment = toDeployment(row, this.box);
        const config: SourceRevisionConfig = { ...deployment.source_revision_config, repo_commit_sha: input.commitSha };
        await this.#insertRevision(
          tx,
          deployment.id,
          deployment.tenant_id,
          deployment.source,
          {
            id: input.revisionId,
            trigger: 'push',
            source_revision_config: config,
            secrets: deployment.secrets,
            resource_spec: deployment.source_config.resource_spec ?? null,
          },
          input.now,
        );
        await tx.run(this.hot.deploymentOnPush, [JSON.stringify(config), input.revisionId, input.now, deployment.id]);
        if (input.actor) await this.#auditInTx(tx, deployment.tenant_id, { actor: input.actor, now: input.now }, 'create', 'revision', input.revisionId);
        return { outcome: 'created' };
      });
    let outcome: PushRevisionResult | { outcome: 'created' };
    try {
      outcome = await attempt();
    } catch (error) {
      // Another transaction inserted the commit's revision between our check and insert: answer it.
      if (!this.sql.dialect.isUniqueViolation(error)) throw error;
      outcome = await attempt();
    }
    if (outcome.outcome !== 'created') return outcome;
    return { outcome: 'created', revision: (await this.getRevisionById(input.revisionId))! };
  }

  // ------------------------------------------------------------ revisions and the pipeline

  async getRevision(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord | null> {
    // Inline, not through `first`: this is a hot path's read.
    const row = await this.sql.row(this.hot.revision, [revisionId, deploymentId, tenantId]);
    return row ? toRevision(row) : null;
  }

  async getRevisionById(revisionId: string): Promise<RevisionRecord | null> {
    // Inline, not through `first`: this is a hot path's read.
    const row = await this.sql.row(this.hot.revisionById, [revisionId]);
    return row ? toRevision(row) : null;
  }

  async getRevisionWork(revisionId: string): Promise<RevisionWork | null> {
    const row = await this.sql.row(this.hot.revisionById, [revisionId]);
    if (!row) return null;
    return {
      ...toRevision(row),
      secrets: this.box.decryptJson<Secret[]>(row.secrets as string),
      resource_spec: row.resource_spec ? (JSON.parse(row.resource_spec as string) as RevisionWork['resource_spec']) : null,
      traceparent: (row.traceparent as string | null) ?? null,
    };
  }

  async revisionTraceparent(revisionId: string): Promise<string | null> {
    const row = await this.sql.row<{ traceparent: string | null }>('SELECT traceparent FROM revisions WHERE id = ?', [revisionId]);
    return row?.traceparent ?? null;
  }

  async listRevisions(tenantId: string, deploymentId: string, query: RevisionListQuery): Promise<Page<RevisionRecord>> {
    const { dialect } = this.sql;
    const filtered = query.status && query.status.length > 0;
    const rows = await this.sql.rows(
      `SELECT * FROM revisions WHERE deployment_id = @deployment_id AND tenant_id = @tenant_id ${filtered ? `AND ${dialect.inList('status', '@statuses')}` : ''}
       ORDER BY seq DESC LIMIT @limit OFFSET @offset`,
      { deployment_id: deploymentId, tenant_id: tenantId, statuses: dialect.list(query.status ?? []), limit: query.limit, offset: query.offset },
    );
    return { resources: rows.map(toRevision), offset: query.offset + rows.length };
  }

  async transitionRevision(change: RevisionTransition, now: string): Promise<RevisionRecord | null> {
    const applied = await this.sql.tx(async (tx) => {
      const changed = await tx.run(this.hot.transition, {
        id: change.revisionId,
        to: change.to,
        status_message: change.statusMessage ?? null,
        from: tx.dialect.list(change.from),
        now,
      });
      if (changed !== 1) return false;
      if (change.to === 'DEPLOYED') {
        const row = (await tx.row(this.hot.revisionById, [change.revisionId]))!;
        await tx.run(this.hot.markDeployed, { revision_id: change.revisionId, deployment_id: row.deployment_id, now });
      }
      for (const log of change.logs ?? []) await tx.run(INSERT_LOG, [change.revisionId, log.type, log.level, log.message, now]);
      return true;
    });
    return applied ? this.getRevisionById(change.revisionId) : null;
  }

  async startNextRevision(deploymentId: string, start: StartRules | ((revision: RevisionRecord) => RevisionStatus), now: string): Promise<StartNextResult> {
    const { planStart, firstStage } = typeof start === 'function' ? { planStart: this.rules.planStart, firstStage: start } : start;
    // The started revision is read back inside the transaction, as it was started.
    return this.sql.tx(async (tx): Promise<StartNextResult> => {
      // The deployment row is the lock of "one revision in progress": two callers cannot both see none.
      const deployment = await tx.row(`${this.hot.deploymentById}${tx.dialect.forUpdate}`, [deploymentId]);
      if (!deployment) return { started: null, skipped: [] };
      const inProgress = (await tx.row<{ n: number }>(this.hot.inProgressCount, [deploymentId]))!.n;
      const queued = inProgress > 0 ? [] : (await tx.rows(this.hot.queued, [deploymentId])).map(toRevision);
      const plan = planStart({ deploymentStatus: deployment.status as DeploymentRecord['status'], inProgress, queued });
      const fromQueued = tx.dialect.list(['QUEUED']);
      if (plan.start) await tx.run(this.hot.transition, { id: plan.start.id, to: firstStage(plan.start), status_message: null, from: fromQueued, now });
      for (const skip of plan.skip) await tx.run(this.hot.transition, { id: skip.id, to: 'SKIPPED', status_message: skip.message, from: fromQueued, now });
      const started = plan.start ? toRevision((await tx.row(this.hot.revisionById, [plan.start.id]))!) : null;
      return { started, skipped: plan.skip.map((skip) => skip.id) };
    });
  }

  async listUnfinishedRevisions(): Promise<RevisionRecord[]> {
    const rows = await this.sql.rows(`SELECT * FROM revisions WHERE status NOT IN (${TERMINAL}) ORDER BY seq`);
    return rows.map(toRevision);
  }

  async takeOverRevisions(lease: WorkLease, staleBefore: string, limit: number): Promise<Array<Pick<RevisionRecord, 'id' | 'deployment_id'>>> {
    const { owner } = lease;
    type Taken = Pick<RevisionRecord, 'id' | 'deployment_id'>;
    return this.sql.tx(async (tx) => {
      if ((await tx.run(this.lease.renewProcessLease, { owner, until: lease.until, now: lease.now })) === 0) return [];
      const taken: Taken[] = [];
      for (const { process_id: dead } of await tx.rows<{ process_id: string }>(this.lease.deadProcesses, { owner, now: lease.now })) {
        const wanted = limit - taken.length;
        if (wanted <= 0) break;
        const rows = await tx.rows<Taken>(this.lease.takeOverFromProcess, { owner, dead, limit: wanted });
        taken.push(...rows);
        if (rows.length < wanted) await tx.run(this.lease.forgetProcess, { dead });
      }
      if (taken.length < limit)
        taken.push(...(await tx.rows<Taken>(this.lease.takeOverUnheld, { owner, stale_before: staleBefore, limit: limit - taken.length })));
      return taken;
    });
  }

  async renewProcessLease(lease: WorkLease): Promise<boolean> {
    const params = { owner: lease.owner, until: lease.until, now: lease.now };
    if ((await this.sql.run(this.lease.renewProcessLease, params)) === 1) return true;
    await this.sql.run(this.lease.restartProcessLease, { owner: lease.owner, until: lease.until });
    return false;
  }

  async endProcessLease(owner: string, now: string): Promise<void> {
    await this.sql.run(this.lease.endProcessLease, { owner, now });
  }

  async holdRevisions(ids: readonly string[], owner: string): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = await this.sql.rows<{ id: string }>(this.lease.holdRevisions, { owner, ids: this.sql.dialect.list(ids) });
    return rows.map((row) => row.id);
  }

  async releaseRevisions(ids: readonly string[], owner: string): Promise<void> {
    if (ids.length > 0) await this.sql.run(this.lease.releaseRevisions, { owner, ids: this.sql.dialect.list(ids) });
  }

  async listStalledQueuedDeployments(): Promise<string[]> {
    const rows = await this.sql.rows<{ deployment_id: string }>(this.lease.stalledQueuedDeployments);
    return rows.map((row) => row.deployment_id);
  }

  async appendLogs(
    revisionId: string,
    entries: Array<{ type: LogType; level: LogLevel; message: string; timestamp?: string }>,
    now: string,
    cap?: RevisionLogCap,
  ): Promise<{ stored: number; dropped: number }> {
    if (entries.length === 0) return { stored: 0, dropped: 0 };
    if (!cap) {
      await this.sql.tx(async (tx) => {
        const stamp = logStamps(tx, revisionId, now);
        for (const entry of entries) await tx.run(INSERT_LOG, [revisionId, entry.type, entry.level, entry.message, await stamp(entry)]);
      });
      return { stored: entries.length, dropped: 0 };
    }
    return this.sql.tx(async (tx) => {
      const stamp = logStamps(tx, revisionId, now);
      // Locked: appends to one revision from several processes count against one cap.
      const counts = await tx.row<{ log_lines: number; log_bytes: number | string; log_dropped: number; log_marker_seq: number | string | null }>(
        `SELECT log_lines, log_bytes, log_dropped, log_marker_seq FROM revisions WHERE id = ?${tx.dialect.forUpdate}`,
        [revisionId],
      );
      if (!counts) return { stored: 0, dropped: 0 };
      let lines = Number(counts.log_lines);
      let bytes = Number(counts.log_bytes);
      let dropped = Number(counts.log_dropped);
      let firstDropped: (typeof entries)[number] | undefined;
      let stored = 0;
      for (const entry of entries) {
        const size = Buffer.byteLength(entry.message);
        // Once a line was dropped, every later one is too: the log never resumes after its marker.
        if (dropped === 0 && lines + 1 <= cap.maxLines && bytes + size <= cap.maxBytes) {
          await tx.run(INSERT_LOG, [revisionId, entry.type, entry.level, entry.message, await stamp(entry)]);
          lines += 1;
          bytes += size;
          stored += 1;
        } else {
          firstDropped ??= entry;
          dropped += 1;
        }
      }
      const newlyDropped = entries.length - stored;
      let markerSeq = counts.log_marker_seq === null ? null : Number(counts.log_marker_seq);
      if (newlyDropped > 0 && markerSeq === null) {
        const marker = await tx.row<{ seq: number | string }>(`${INSERT_LOG} RETURNING seq`, [
          revisionId,
          firstDropped!.type,
          'warn',
          cap.marker(dropped),
          await stamp({ type: firstDropped!.type }),
        ]);
        markerSeq = Number(marker!.seq);
      } else if (newlyDropped > 0) {
        await tx.run('UPDATE revision_logs SET message = ? WHERE seq = ?', [cap.marker(dropped), markerSeq]);
      }
      await tx.run('UPDATE revisions SET log_lines = ?, log_bytes = ?, log_dropped = ?, log_marker_seq = ? WHERE id = ?', [
        lines,
        bytes,
        dropped,
        markerSeq,
        revisionId,
      ]);
      return { stored, dropped: newlyDropped };
    });
  }

  async readLogs(revisionId: string, type: LogType, afterSeq: number, limit: number): Promise<{ logs: LogEntry[]; lastSeq: number | null; more: boolean }> {
    const rows = await this.sql.rows<{ seq: number; timestamp: string; level: LogLevel; message: string }>(this.hot.readLogs, [
      revisionId,
      type,
      afterSeq,
      limit + 1,
    ]);
    const page = rows.slice(0, limit);
    return {
      logs: page.map(({ timestamp, level, message }) => ({ timestamp, level, message })),
      lastSeq: page.at(-1)?.seq ?? null,
      more: rows.length > limit,
    };
  }

  async searchLogs(revisionId: string, filter: LogFilter): Promise<{ logs: Array<LogEntry & { seq: number }>; more: boolean }> {
    const where = ['revision_id = @revision_id', 'type = @type'];
    if (filter.cursor > 0) where.push(filter.order === 'asc' ? 'seq > @cursor' : 'seq < @cursor');
    if (filter.level) where.push('level = @level');
    if (filter.query) where.push(`message ${this.sql.dialect.likeIgnoringCase} @query ESCAPE '\\'`);
    if (filter.startTime) where.push('timestamp >= @start_time');
    if (filter.endTime) where.push('timestamp <= @end_time');
    const rows = await this.sql.rows<LogEntry & { seq: number }>(
      `SELECT seq, timestamp, level, message FROM revision_logs WHERE ${where.join(' AND ')}
       ORDER BY seq ${filter.order === 'asc' ? 'ASC' : 'DESC'} LIMIT @limit`,
      {
        revision_id: revisionId,
        type: filter.type,
        cursor: filter.cursor,
        level: filter.level ?? null,
        query: filter.query ? `%${escapeLike(filter.query)}%` : null,
        start_time: filter.startTime ?? null,
        end_time: filter.endTime ?? null,
        limit: filter.limit + 1,
      },
    );
    return { logs: rows.slice(0, filter.limit), more: rows.length > filter.limit };
  }

  // ------------------------------------------------------------ listeners

  async createListener(input: Listener): Promise<void> {
    await this.refusingDuplicate({ kind: 'listener_compute_id_taken', computeId: input.compute_id }, async () => {
      await this.sql.run(
        `INSERT INTO listeners (id, tenant_id, version, compute_type, compute_id, compute_config, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          input.id,
          input.tenant_id,
          input.version ?? null,
          input.compute_type,
          input.compute_id,
          JSON.stringify(input.compute_config),
          input.created_at,
          input.updated_at,
        ],
      );
    });
  }

  async getListener(tenantId: string, id: string): Promise<ListenerRecord | null> {
    return this.first(toListener, 'SELECT * FROM listeners WHERE id = ? AND tenant_id = ?', [id, tenantId]);
  }

  async servingComputeType(tenantId: string, listenerId: string | null): Promise<ComputeType | null> {
    const row = await this.sql.row<{ compute_type: ComputeType }>(this.hot.servingComputeType, [tenantId, listenerId, tenantId]);
    return row?.compute_type ?? null;
  }

  async getListenerById(id: string): Promise<ListenerRecord | null> {
    return this.first(toListener, 'SELECT * FROM listeners WHERE id = ?', [id]);
  }

  async listListeners(tenantId: string, limit: number, offset: number): Promise<Page<ListenerRecord>> {
    const rows = await this.sql.rows('SELECT * FROM listeners WHERE tenant_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?', [
      tenantId,
      limit,
      offset,
    ]);
    return { resources: rows.map(toListener), offset: offset + rows.length };
  }

  async updateListener(tenantId: string, id: string, computeConfig: ComputeConfig, now: string, version?: string | null): Promise<ListenerRecord | null> {
    const changed = await this.sql.run(
      'UPDATE listeners SET compute_config = ?, version = coalesce(?, version), updated_at = ? WHERE id = ? AND tenant_id = ?',
      [JSON.stringify(computeConfig), version ?? null, now, id, tenantId],
    );
    return changed === 1 ? this.getListener(tenantId, id) : null;
  }

  async deleteListener(tenantId: string, id: string): Promise<'deleted' | 'not_found' | 'in_use'> {
    return this.sql.tx(async (tx) => {
      if (!(await tx.row(`SELECT 1 FROM listeners WHERE id = ? AND tenant_id = ?${tx.dialect.forUpdate}`, [id, tenantId]))) return 'not_found';
      if (await tx.row('SELECT 1 FROM deployments WHERE listener_id = ? LIMIT 1', [id])) return 'in_use';
      await tx.run('DELETE FROM listeners WHERE id = ?', [id]);
      return 'deleted';
    });
  }

  // ------------------------------------------------------------ GitHub integrations

  async createIntegration(input: IntegrationRecord): Promise<void> {
    await this.refusingDuplicate({ kind: 'installation_linked_here', installationId: input.installation_id }, async () => {
      await this.sql.tx(async (tx) => {
        // An installation belongs to one GitHub account, so to one organization here: the first to
        // link it owns it, and no other organization can claim it (or read its deliveries). Links
        // of one installation are made one at a time.
        await tx.dialect.serialize(tx, `installation:${input.installation_id}`);
        const owner = await tx.row(
          `SELECT w.organization_id FROM github_integrations g JOIN workspaces w ON w.id = g.tenant_id
           WHERE g.installation_id = ? AND w.organization_id <> (SELECT organization_id FROM workspaces WHERE id = ?) LIMIT 1`,
          [input.installation_id, input.tenant_id],
        );
        if (owner) throw this.rules.refusal({ kind: 'installation_linked_elsewhere', installationId: input.installation_id });
        await tx.run('INSERT INTO github_integrations (id, tenant_id, installation_id, name, suspended_at, created_at) VALUES (?, ?, ?, ?, NULL, ?)', [
          input.id,
          input.tenant_id,
          input.installation_id,
          input.name,
          input.created_at,
        ]);
      });
    });
  }

  async getIntegration(tenantId: string, id: string): Promise<IntegrationRecord | null> {
    return this.first(toIntegration, 'SELECT * FROM github_integrations WHERE id = ? AND tenant_id = ?', [id, tenantId]);
  }

  async listIntegrations(tenantId: string): Promise<IntegrationRecord[]> {
    return (await this.sql.rows('SELECT * FROM github_integrations WHERE tenant_id = ? ORDER BY created_at, rowid', [tenantId])).map(toIntegration);
  }

  async deleteIntegration(tenantId: string, id: string): Promise<boolean> {
    return (await this.sql.run('DELETE FROM github_integrations WHERE id = ? AND tenant_id = ?', [id, tenantId])) === 1;
  }

  async getIntegrationById(id: string): Promise<IntegrationRecord | null> {
    // Inline, not through `first`: this is a hot path's read.
    const row = await this.sql.row(this.hot.integrationById, [id]);
    return row ? toIntegration(row) : null;
  }

  async removeInstallation(installationId: number, audit?: MachineChange): Promise<IntegrationRecord[]> {
    return this.sql.tx(async (tx) => {
      const rows = await tx.rows(`SELECT * FROM github_integrations WHERE installation_id = ? ORDER BY rowid${tx.dialect.forUpdate}`, [installationId]);
      await tx.run('DELETE FROM github_integrations WHERE installation_id = ?', [installationId]);
      const removed = rows.map(toIntegration);
      if (audit) for (const integration of removed) await this.#auditInTx(tx, integration.tenant_id, audit, 'delete', 'integration', integration.id);
      return removed;
    });
  }

  async setInstallationSuspended(installationId: number, suspendedAt: string | null, audit?: MachineChange): Promise<IntegrationRecord[]> {
    return this.sql.tx(async (tx) => {
      await tx.run('UPDATE github_integrations SET suspended_at = ? WHERE installation_id = ?', [suspendedAt, installationId]);
      const marked = (await tx.rows('SELECT * FROM github_integrations WHERE installation_id = ? ORDER BY rowid', [installationId])).map(toIntegration);
      const action = suspendedAt === null ? 'unsuspend' : 'suspend';
      if (audit) for (const integration of marked) await this.#auditInTx(tx, integration.tenant_id, audit, action, 'integration', integration.id);
      return marked;
    });
  }

  // ------------------------------------------------------------ tracing projects

  async getTracingProject(tenantId: string, id: string): Promise<TracingProject | null> {
    return this.first(toTracingProject, 'SELECT * FROM tracing_projects WHERE id = ? AND tenant_id = ?', [id, tenantId]);
  }

  async deleteTracingProject(tenantId: string, id: string): Promise<'deleted' | 'not_found' | { deploymentId: string }> {
    return this.sql.tx(async (tx) => {
      const row = await tx.row<{ deployment_id: string | null }>(
        `SELECT deployment_id FROM tracing_projects WHERE id = ? AND tenant_id = ?${tx.dialect.forUpdate}`,
        [id, tenantId],
      );
      if (!row) return 'not_found';
      if (row.deployment_id !== null) return { deploymentId: row.deployment_id };
      await tx.run('DELETE FROM tracing_projects WHERE id = ?', [id]);
      return 'deleted';
    });
  }

  async listTracingProjects(tenantId: string, name: string | undefined, limit: number, offset: number): Promise<Page<TracingProject>> {
    const rows = await this.sql.rows(
      `SELECT * FROM tracing_projects WHERE tenant_id = @tenant_id AND (CAST(@name AS TEXT) IS NULL OR name = @name)
       ORDER BY created_at DESC, rowid DESC LIMIT @limit OFFSET @offset`,
      { tenant_id: tenantId, name: name ?? null, limit, offset },
    );
    return { resources: rows.map(toTracingProject), offset: offset + rows.length };
  }
}

/**
 * The timestamps a revision's new log lines are stored with: a line's own (when it was printed, as
 * an agent reports it) or else `now`, never later than `now` (an agent's clock may run ahead), and
 * strictly after the revision's previous line of the same type, so lines printed in one
 * millisecond, or sent in one batch, still have distinct, increasing times: a client that follows a
 * log by `start_time` (`langgraph deploy logs -f`) then always moves on (docs/decisions/log-timestamps.md).
 */
function logStamps(tx: Db, revisionId: string, now: string): (entry: { type: LogType; timestamp?: string }) => Promise<string> {
  const nowMs = Date.parse(now);
  const previous = new Map<LogType, number>();
  return async ({ type, timestamp }) => {
    if (!previous.has(type)) {
      const last = await tx.row<{ timestamp: string }>(LAST_LOG_TIMESTAMP, [revisionId, type]);
      previous.set(type, last ? Date.parse(last.timestamp) : Number.NEGATIVE_INFINITY);
    }
    const reported = timestamp === undefined ? Number.NaN : Date.parse(timestamp);
    const ms = Math.max(Number.isNaN(reported) ? nowMs : Math.min(reported, nowMs), previous.get(type)! + 1);
    previous.set(type, ms);
    return new Date(ms).toISOString();
  };
}
