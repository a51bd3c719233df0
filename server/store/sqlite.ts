import Database from 'better-sqlite3';
import type { ApiKey } from '../../shared/schemas/api-key.ts';
import { revisionConfig, type DeploymentListQuery, type SourceConfig, type SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { ComputeConfig, ComputeType, Listener } from '../../shared/schemas/listener.ts';
import {
  type LogEntry,
  type LogFilter,
  type LogLevel,
  type LogType,
  type RevisionListQuery,
  type RevisionStatus,
} from '../../shared/schemas/revision.ts';
import type { Secret } from '../../shared/schemas/secret.ts';
import type { TracingProject } from '../../shared/schemas/tracing-project.ts';
import type { Workspace } from '../../shared/schemas/workspace.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { Conflict, NotFound } from '../domain/errors.ts';
import { normalizeRepoUrl } from '../domain/repo-url.ts';
import { GroupCommit } from './group-commit.ts';
import { HOT_QUERIES, LEASE_QUERIES, SET_RECONCILE_HEAD, TERMINAL } from './hot-queries.ts';
import { sealedIfSame, toApiKey, toDeployment, toIntegration, toListener, toRevision, toTracingProject, toWorkspace, type Row } from './rows.ts';
import { MIGRATIONS } from './migrations/index.ts';
import { sqliteWriteProbe } from './write-probe.ts';
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
} from './types.ts';



/** A deployment's JSON and query columns, as `deploymentColumns` derives them. */
type DeploymentColumns = {
  source_config: string;
  source_revision_config: string;
  secrets: string;
  deployment_type: SourceConfig['deployment_type'];
  build_on_push: 0 | 1;
  repo_ref: string | null;
};

export type SqliteOptions = {
  /** A file path, or `:memory:`. */
  path: string;
  secretBox: SecretBox;
  /** `FULL` (default) makes every acknowledged write survive a power loss, not only a crash. */
  synchronous?: 'FULL' | 'NORMAL';
};

/** Opens the database, applies pragmas and pending migrations. */
export function openSqliteStore(options: SqliteOptions): SqliteStore {
  const db = new Database(options.path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${options.synchronous ?? 'FULL'}`);
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 5000');
  db.pragma('cache_size = -16000');
  db.pragma('temp_store = MEMORY');
  migrate(db);
  expireLeftLeases(db);
  return new SqliteStore(db, options.secretBox);
}

/** A time before every lease: what a lease left by a previous run is set to. */
const LONG_AGO = '1970-01-01T00:00:00.000Z';
/** The owner named on revisions a previous run started but never held (a process id is random hex). */
const PREVIOUS_RUN = 'previous-run';

/**
 * SQLite is one server process (contract §10): every lease found in the file when it is opened was
 * left by a run that has ended, so it is expired here and the start's sweep resumes that work at
 * once, as a restart always has, instead of waiting for the leases to run out.
 */
function expireLeftLeases(db: Database.Database): void {
  db.transaction(() => {
    // Every process lease is a previous run's; revisions it started but never held are named after
    // that run too, so the start's sweep takes them at once instead of a lease later.
    db.prepare('UPDATE process_leases SET lease_expires_at = ?').run(LONG_AGO);
    const unheld = db.prepare(`UPDATE revisions SET runner_id = ? WHERE runner_id IS NULL AND status NOT IN (${TERMINAL}) AND status <> 'QUEUED'`).run(PREVIOUS_RUN);
    if (unheld.changes > 0) db.prepare('INSERT OR REPLACE INTO process_leases (process_id, lease_expires_at) VALUES (?, ?)').run(PREVIOUS_RUN, LONG_AGO);
    db.prepare("UPDATE deployments SET teardown_lease_expires_at = ? WHERE status = 'AWAITING_DELETE' AND teardown_owner IS NOT NULL").run(LONG_AGO);
    db.prepare("UPDATE webhook_deliveries SET claimed_by = NULL, claim_expires_at = NULL WHERE status = 'pending' AND claim_expires_at IS NOT NULL").run();
    db.prepare("UPDATE uploads SET receive_lease_expires_at = ? WHERE state = 'receiving'").run(LONG_AGO);
  })();
}

function migrate(db: Database.Database): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  const applied = new Set((db.prepare('SELECT version FROM schema_migrations').all() as Array<{ version: number }>).map((r) => r.version));
  for (const migration of MIGRATIONS) {
    if (applied.has(migration.version)) continue;
    db.transaction(() => {
      db.exec(migration.sql);
      db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(
        migration.version,
        migration.name,
        new Date().toISOString(),
      );
    })();
  }
}

function isUniqueViolation(error: unknown): boolean {
  return error instanceof Error && 'code' in error && (error as { code: string }).code === 'SQLITE_CONSTRAINT_UNIQUE';
}

function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/** The SQLite store: all SQL of the control plane lives in this folder. */
export class SqliteStore implements Store {
  readonly db: Database.Database;
  readonly #box: SecretBox;
  readonly #stmt: ReturnType<SqliteStore['prepareStatements']>;
  /** Statements by SQL text: each is prepared once, however often (and in whichever variant) it runs. */
  readonly #statements = new Map<string, Database.Statement>();
  /** Creates that arrive together share one commit (one wait for the disk). */
  readonly #creates: GroupCommit;
  /**
   * A create's transaction, made once: `db.transaction(fn)` builds its wrapper functions anew on
   * every call, ~2% of a POST's time in issue 13's profile.
   */
  readonly #createTransaction: (input: NewDeployment, cols: DeploymentColumns) => boolean;

  constructor(db: Database.Database, box: SecretBox) {
    this.db = db;
    this.#box = box;
    this.#creates = new GroupCommit(db);
    this.#stmt = this.prepareStatements();
    this.#createTransaction = db.transaction((input: NewDeployment, cols: DeploymentColumns) => this.writeCreate(input, cols));
  }

  /** Statements on hot paths, prepared once. */
  private prepareStatements() {
    return {
      apiKeyByHash: this.sql(HOT_QUERIES.apiKeyByHash),
      defaultWorkspace: this.sql(HOT_QUERIES.defaultWorkspace),
      deployment: this.sql(HOT_QUERIES.deployment),
      deploymentById: this.sql(HOT_QUERIES.deploymentById),
      revision: this.sql(HOT_QUERIES.revision),
      revisionById: this.sql(HOT_QUERIES.revisionById),
      insertRevision: this.sql(HOT_QUERIES.insertRevision),
      servingComputeType: this.sql(HOT_QUERIES.servingComputeType),
      transition: this.sql(HOT_QUERIES.transition),
      markDeployed: this.sql(HOT_QUERIES.markDeployed),
      deploymentOnPush: this.sql(HOT_QUERIES.deploymentOnPush),
      integrationById: this.sql(HOT_QUERIES.integrationById),
      inProgressCount: this.sql(HOT_QUERIES.inProgressCount),
      queued: this.sql(HOT_QUERIES.queued),
      revisionOfCommit: this.sql(HOT_QUERIES.revisionOfCommit),
      insertLog: this.sql('INSERT INTO revision_logs (revision_id, type, level, message, timestamp) VALUES (?, ?, ?, ?, ?)'),
      readLogs: this.sql(HOT_QUERIES.readLogs),
    };
  }

  /** The prepared statement for `sql`, prepared on first use. */
  private sql(sql: string): Database.Statement {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.db.prepare(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  close(): void {
    this.db.close();
  }

  async ping(): Promise<boolean> {
    return (this.sql('SELECT 1 AS ok').get() as { ok: number }).ok === 1;
  }

  #probeWrite: (() => void) | undefined;
  async probeWrite(): Promise<void> {
    (this.#probeWrite ??= sqliteWriteProbe(this.db))();
  }

  // ------------------------------------------------------------ tenancy and keys

  async bootstrap(input: { keyHash: string | null; keyId: string; now: string }): Promise<BootstrapResult> {
    const { db } = this;
    return db.transaction((): BootstrapResult => {
      const wasEmpty = (this.sql('SELECT count(*) AS n FROM api_keys').get() as { n: number }).n === 0;
      let org = this.sql("SELECT id FROM organizations WHERE name = 'default'").get() as { id: string } | undefined;
      if (!org) {
        org = { id: crypto.randomUUID() };
        this.sql("INSERT INTO organizations (id, name, created_at) VALUES (?, 'default', ?)").run(org.id, input.now);
      }
      let ws = this.sql('SELECT id FROM workspaces WHERE organization_id = ? AND is_default = 1').get(org.id) as { id: string } | undefined;
      if (!ws) {
        ws = { id: crypto.randomUUID() };
        this.sql("INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, 'default', 1, ?)").run(
          ws.id,
          org.id,
          input.now,
        );
        this.sql(
          `INSERT INTO listeners (id, tenant_id, compute_type, compute_id, compute_config, created_at, updated_at)
           VALUES (?, ?, 'sandbox', 'sandbox', '{"k8s_namespaces":[]}', ?, ?)`,
        ).run(crypto.randomUUID(), ws.id, input.now, input.now);
      }
      if (input.keyHash) {
        this.sql(
          `INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at)
           VALUES (?, ?, NULL, ?, 'bootstrap key', ?)
           ON CONFLICT (key_hash) DO UPDATE SET revoked_at = NULL`,
        ).run(input.keyId, org.id, input.keyHash, input.now);
      }
      return { organizationId: org.id, workspaceId: ws.id, wasEmpty };
    })();
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    const row = this.#stmt.apiKeyByHash.get(keyHash) as Row | undefined;
    return row ? { ...toApiKey(row), revoked: row.revoked_at !== null, key_hash: row.key_hash as string } : null;
  }

  async createApiKey(input: ApiKey & { key_hash: string }): Promise<void> {
    this.sql(
        'INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at) VALUES (@id, @organization_id, @workspace_id, @key_hash, @description, @created_at)',
      )
      .run(input);
  }

  async listApiKeys(organizationId: string): Promise<ApiKey[]> {
    const rows = this.sql('SELECT * FROM api_keys WHERE organization_id = ? AND revoked_at IS NULL ORDER BY created_at DESC, rowid DESC')
      .all(organizationId) as Row[];
    return rows.map(toApiKey);
  }

  async revokeApiKey(organizationId: string, id: string, now: string): Promise<boolean> {
    const result = this.sql('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND organization_id = ? AND revoked_at IS NULL')
      .run(now, id, organizationId);
    return result.changes === 1;
  }

  async getWorkspace(id: string): Promise<(Workspace & { is_default: boolean }) | null> {
    const row = this.sql('SELECT * FROM workspaces WHERE id = ?').get(id) as Row | undefined;
    return row ? { ...toWorkspace(row), is_default: row.is_default === 1 } : null;
  }

  async getDefaultWorkspace(organizationId: string): Promise<Workspace | null> {
    const row = this.#stmt.defaultWorkspace.get(organizationId) as Row | undefined;
    return row ? toWorkspace(row) : null;
  }

  async createWorkspace(input: Workspace): Promise<void> {
    const { db } = this;
    try {
      db.transaction(() => {
        this.sql('INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, ?, 0, ?)').run(
          input.id,
          input.organization_id,
          input.name,
          input.created_at,
        );
        // Every workspace can deploy to the sandbox from its first minute, as the default one can.
        this.sql(
          `INSERT INTO listeners (id, tenant_id, compute_type, compute_id, compute_config, created_at, updated_at)
           VALUES (?, ?, 'sandbox', 'sandbox', '{"k8s_namespaces":[]}', ?, ?)`,
        ).run(crypto.randomUUID(), input.id, input.created_at, input.created_at);
      })();
    } catch (error) {
      if (isUniqueViolation(error)) throw new Conflict(`A workspace named '${input.name}' already exists.`);
      throw error;
    }
  }

  async listWorkspaces(organizationId: string): Promise<Workspace[]> {
    const rows = this.sql('SELECT * FROM workspaces WHERE organization_id = ? ORDER BY created_at, rowid').all(organizationId) as Row[];
    return rows.map(toWorkspace);
  }

  // ------------------------------------------------------------ deployments

  async createDeployment(input: NewDeployment): Promise<CreatedDeployment> {
    const d = input.deployment;
    const cols = this.deploymentColumns(d.source_config, d.source_revision_config, d.secrets);
    let revisionHeld = false;
    try {
      await this.#creates.run(() => {
        revisionHeld = this.#createTransaction(input, cols);
      });
    } catch (error) {
      if (isUniqueViolation(error)) {
        throw new Conflict(`A deployment or tracing project named '${d.name}' already exists in this workspace.`);
      }
      throw error;
    }
    // What was written, as written: no need to read it back and decrypt it again.
    return { deployment: { ...d, delete_tracing_project: false }, revisionHeld };
  }

  /** The rows of a create (see `#createTransaction`); true when its revision names its runner. */
  private writeCreate(input: NewDeployment, cols: DeploymentColumns): boolean {
    const { deployment: d, revision, tracingProject: tp, runner } = input;
    this.sql(
      `INSERT INTO deployments (id, tenant_id, name, source, source_config, source_revision_config, secrets, status,
         latest_revision_id, active_revision_id, image_version, deployment_type, integration_id, listener_id,
         repo_url_key, repo_ref, build_on_push, created_at, updated_at)
       VALUES (@id, @tenant_id, @name, @source, @source_config, @source_revision_config, @secrets, @status,
         @latest_revision_id, NULL, @image_version, @deployment_type, @integration_id, @listener_id,
         @repo_url_key, @repo_ref, @build_on_push, @created_at, @updated_at)`,
    ).run({
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
    });
    const held = revision ? this.insertRevision(d.id, d.tenant_id, d.source, revision, d.created_at, sealedIfSame(revision.secrets, d.secrets, cols.secrets), runner) : false;
    this.sql('INSERT INTO tracing_projects (id, tenant_id, name, deployment_id, created_at) VALUES (?, ?, ?, ?, ?)').run(
      tp.id,
      tp.tenant_id,
      tp.name,
      tp.deployment_id,
      tp.created_at,
    );
    return held;
  }

  /** The JSON and query columns derived from a deployment's current config. */
  private deploymentColumns(sourceConfig: SourceConfig, revisionConfig: SourceRevisionConfig, secrets: Secret[]): DeploymentColumns {
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
   * True when it names `runner` (a started revision, its process lease live).
   */
  private insertRevision(deploymentId: string, tenantId: string, source: string, revision: NewRevision, now: string, sealedSecrets?: string, runner?: RevisionRunner): boolean {
    const stored = this.#stmt.insertRevision.get({
      id: revision.id,
      deployment_id: deploymentId,
      tenant_id: tenantId,
      status: revision.status ?? 'QUEUED',
      status_message: revision.status_message ?? null,
      source,
      source_revision_config: JSON.stringify(revision.source_revision_config),
      commit_sha: revision.source_revision_config.repo_commit_sha ?? null,
      secrets: sealedSecrets ?? this.#box.encryptJson(revision.secrets),
      resource_spec: revision.resource_spec ? JSON.stringify(revision.resource_spec) : null,
      trigger: revision.trigger,
      now,
      runner: runner?.owner ?? null,
      runner_now: runner?.now ?? null,
    }) as { runner_id: string | null };
    for (const log of revision.logs ?? []) this.#stmt.insertLog.run(revision.id, log.type, log.level, log.message, now);
    return stored.runner_id !== null;
  }

  async getDeployment(tenantId: string, id: string): Promise<DeploymentRecord | null> {
    const row = this.#stmt.deployment.get(id, tenantId) as Row | undefined;
    return row ? toDeployment(row, this.#box) : null;
  }

  async getDeploymentById(id: string): Promise<DeploymentRecord | null> {
    const row = this.#stmt.deploymentById.get(id) as Row | undefined;
    return row ? toDeployment(row, this.#box) : null;
  }

  async listDeployments(tenantId: string, query: DeploymentListQuery): Promise<Page<DeploymentRecord>> {
    const where = ['tenant_id = @tenant_id'];
    const params: Row = { tenant_id: tenantId, limit: query.limit, offset: query.offset };
    if (query.name_contains) {
      where.push("name LIKE @name ESCAPE '\\'");
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
      where.push('id IN (SELECT value FROM json_each(@ids))');
      params.ids = JSON.stringify(query.deployment_ids);
    }
    const rows = this.sql(`SELECT * FROM deployments WHERE ${where.join(' AND ')} ORDER BY created_at DESC, rowid DESC LIMIT @limit OFFSET @offset`)
      .all(params) as Row[];
    return { resources: rows.map((row) => toDeployment(row, this.#box)), offset: query.offset + rows.length };
  }

  async updateDeployment(
    tenantId: string,
    id: string,
    plan: (current: DeploymentRecord) => DeploymentChange,
    now: string,
  ): Promise<{ deployment: DeploymentRecord; revision: RevisionRecord | null }> {
    const { db } = this;
    const revisionId = db.transaction((): string | null => {
      const row = this.#stmt.deployment.get(id, tenantId) as Row | undefined;
      if (!row) throw new NotFound(`Deployment ID ${id} not found.`);
      const change = plan(toDeployment(row, this.#box));
      const cols = this.deploymentColumns(change.source_config, change.source_revision_config, change.secrets);
      this.sql(
        `UPDATE deployments SET source_config = @source_config, source_revision_config = @source_revision_config,
           secrets = @secrets, deployment_type = @deployment_type, build_on_push = @build_on_push, repo_ref = @repo_ref,
           latest_revision_id = coalesce(@latest_revision_id, latest_revision_id), updated_at = @now
         WHERE id = @id`,
      ).run({
        id,
        now,
        latest_revision_id: change.revision?.id ?? null,
        ...cols,
      });
      if (change.revision) this.insertRevision(id, tenantId, row.source as string, change.revision, now, sealedIfSame(change.revision.secrets, change.secrets, cols.secrets));
      return change.revision?.id ?? null;
    })();
    const deployment = (await this.getDeploymentById(id))!;
    return { deployment, revision: revisionId ? await this.getRevisionById(revisionId) : null };
  }

  async markDeploymentDeleting(tenantId: string, id: string, deleteTracingProject: boolean, now: string): Promise<{ deployment: DeploymentRecord; marked: boolean } | null> {
    const { db } = this;
    const marked = db.transaction((): boolean | null => {
      const row = this.#stmt.deployment.get(id, tenantId) as Row | undefined;
      if (!row) return null;
      this.sql('UPDATE deployments SET delete_tracing_project = max(delete_tracing_project, ?) WHERE id = ?').run(deleteTracingProject ? 1 : 0, id);
      // Only one DELETE moves it: concurrent ones see it marked and start no second teardown.
      return this.sql("UPDATE deployments SET status = 'AWAITING_DELETE', updated_at = ? WHERE id = ? AND status <> 'AWAITING_DELETE'").run(now, id).changes === 1;
    })();
    if (marked === null) return null;
    return { deployment: (await this.getDeploymentById(id))!, marked };
  }

  async listDeletingDeployments(): Promise<DeploymentRecord[]> {
    const rows = this.sql("SELECT * FROM deployments WHERE status = 'AWAITING_DELETE'").all() as Row[];
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async claimTeardown(deploymentId: string, lease: WorkLease): Promise<boolean> {
    return (
      this.sql(
        `UPDATE deployments SET teardown_owner = @owner, teardown_lease_expires_at = @until
         WHERE id = @id AND status = 'AWAITING_DELETE' AND (teardown_owner IS NULL OR teardown_owner = @owner OR teardown_lease_expires_at < @now)`,
      ).run({ id: deploymentId, owner: lease.owner, until: lease.until, now: lease.now }).changes === 1
    );
  }

  async takeOverTeardowns(lease: WorkLease, limit: number): Promise<DeploymentRecord[]> {
    const rows = this.sql(LEASE_QUERIES.takeOverTeardowns).all({ owner: lease.owner, until: lease.until, now: lease.now, limit }) as Row[];
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async renewTeardownLeases(deploymentIds: readonly string[], lease: WorkLease): Promise<string[]> {
    if (deploymentIds.length === 0) return [];
    const rows = this.sql(LEASE_QUERIES.renewTeardownLeases).all({ owner: lease.owner, until: lease.until, ids: JSON.stringify(deploymentIds) }) as Array<{ id: string }>;
    return rows.map((row) => row.id);
  }

  async removeDeployment(id: string): Promise<void> {
    const { db } = this;
    db.transaction(() => {
      const row = this.sql('SELECT delete_tracing_project FROM deployments WHERE id = ?').get(id) as Row | undefined;
      if (!row) return;
      if (row.delete_tracing_project === 1) {
        this.sql('DELETE FROM tracing_projects WHERE deployment_id = ?').run(id);
      } else {
        this.sql('UPDATE tracing_projects SET deployment_id = NULL WHERE deployment_id = ?').run(id);
      }
      this.sql('DELETE FROM revision_logs WHERE revision_id IN (SELECT id FROM revisions WHERE deployment_id = ?)').run(id);
      this.sql('DELETE FROM revisions WHERE deployment_id = ?').run(id);
      this.sql('DELETE FROM deployments WHERE id = ?').run(id);
    })();
  }

  async listDeploymentsByRepo(repoUrlKey: string): Promise<DeploymentRecord[]> {
    const rows = this.sql(HOT_QUERIES.deploymentsByRepo).all(repoUrlKey) as Row[];
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async listBuildOnPushDeployments(): Promise<DeploymentRecord[]> {
    const rows = this.sql(
        "SELECT * FROM deployments WHERE build_on_push = 1 AND source = 'github' AND status <> 'AWAITING_DELETE' ORDER BY created_at, rowid",
      )
      .all() as Row[];
    return rows.map((row) => toDeployment(row, this.#box));
  }

  async createPushRevision(input: PushRevisionInput): Promise<PushRevisionResult> {
    const { db } = this;
    const outcome = db.transaction((): PushRevisionResult | { outcome: 'created' } => {
      const row = this.#stmt.deploymentById.get(input.deploymentId) as Row | undefined;
      if (!row) return { outcome: 'not_buildable', reason: 'the deployment no longer exists' };
      if (input.headSeen) this.sql(SET_RECONCILE_HEAD).run(input.deploymentId, input.headSeen.repoRef, input.commitSha, input.now);
      if (row.status === 'AWAITING_DELETE') return { outcome: 'not_buildable', reason: 'the deployment is being deleted' };
      const existing = this.#stmt.revisionOfCommit.get(input.deploymentId, input.commitSha) as { id: string; status: RevisionStatus } | undefined;
      if (existing) return { outcome: 'exists', revisionId: existing.id, status: existing.status };
      const deployment = toDeployment(row, this.#box);
      const config: SourceRevisionConfig = { ...deployment.source_revision_config, repo_commit_sha: input.commitSha };
      this.insertRevision(
        deployment.id,
        deployment.tenant_id,
        deployment.source,
        { id: input.revisionId, trigger: 'push', source_revision_config: config, secrets: deployment.secrets, resource_spec: deployment.source_config.resource_spec ?? null },
        input.now,
      );
      this.#stmt.deploymentOnPush.run(
        JSON.stringify(config),
        input.revisionId,
        input.now,
        deployment.id,
      );
      return { outcome: 'created' };
    })();
    if (outcome.outcome !== 'created') return outcome;
    return { outcome: 'created', revision: (await this.getRevisionById(input.revisionId))! };
  }

  // ------------------------------------------------------------ revisions and the pipeline

  async getRevision(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord | null> {
    const row = this.#stmt.revision.get(revisionId, deploymentId, tenantId) as Row | undefined;
    return row ? toRevision(row) : null;
  }

  async getRevisionById(revisionId: string): Promise<RevisionRecord | null> {
    const row = this.#stmt.revisionById.get(revisionId) as Row | undefined;
    return row ? toRevision(row) : null;
  }

  async getRevisionWork(revisionId: string): Promise<RevisionWork | null> {
    const row = this.#stmt.revisionById.get(revisionId) as Row | undefined;
    if (!row) return null;
    return {
      ...toRevision(row),
      secrets: this.#box.decryptJson<Secret[]>(row.secrets as string),
      resource_spec: row.resource_spec ? (JSON.parse(row.resource_spec as string) as RevisionWork['resource_spec']) : null,
    };
  }

  async listRevisions(tenantId: string, deploymentId: string, query: RevisionListQuery): Promise<Page<RevisionRecord>> {
    const statusFilter = query.status && query.status.length > 0 ? 'AND status IN (SELECT value FROM json_each(@statuses))' : '';
    const rows = this.sql(
        `SELECT * FROM revisions WHERE deployment_id = @deployment_id AND tenant_id = @tenant_id ${statusFilter}
         ORDER BY seq DESC LIMIT @limit OFFSET @offset`,
      )
      .all({
        deployment_id: deploymentId,
        tenant_id: tenantId,
        statuses: JSON.stringify(query.status ?? []),
        limit: query.limit,
        offset: query.offset,
      }) as Row[];
    return { resources: rows.map((row) => toRevision(row)), offset: query.offset + rows.length };
  }

  async transitionRevision(change: RevisionTransition, now: string): Promise<RevisionRecord | null> {
    const { db } = this;
    const applied = db.transaction((): boolean => {
      const result = this.#stmt.transition.run({
        id: change.revisionId,
        to: change.to,
        status_message: change.statusMessage ?? null,
        from: JSON.stringify(change.from),
        now,
      });
      if (result.changes !== 1) return false;
      if (change.to === 'DEPLOYED') {
        const row = this.#stmt.revisionById.get(change.revisionId) as Row;
        this.#stmt.markDeployed.run({ revision_id: change.revisionId, deployment_id: row.deployment_id, now });
      }
      for (const log of change.logs ?? []) this.#stmt.insertLog.run(change.revisionId, log.type, log.level, log.message, now);
      return true;
    })();
    return applied ? this.getRevisionById(change.revisionId) : null;
  }

  async startNextRevision(
    deploymentId: string,
    firstStage: (revision: RevisionRecord) => RevisionStatus,
    now: string,
  ): Promise<StartNextResult> {
    const { db } = this;
    const outcome = db.transaction((): { startedId: string | null; skipped: string[] } => {
      if ((this.#stmt.inProgressCount.get(deploymentId) as { n: number }).n > 0) return { startedId: null, skipped: [] };
      // A deployment being deleted starts nothing new; its teardown interrupts what is queued.
      const deployment = this.#stmt.deploymentById.get(deploymentId) as Row | undefined;
      if (!deployment || deployment.status === 'AWAITING_DELETE') return { startedId: null, skipped: [] };
      const queued = this.#stmt.queued.all(deploymentId) as Row[];
      const [newest, ...older] = queued;
      if (!newest) return { startedId: null, skipped: [] };
      const revision = toRevision(newest);
      this.#stmt.transition.run({ id: revision.id, to: firstStage(revision), status_message: null, from: '["QUEUED"]', now });
      for (const row of older) {
        this.#stmt.transition.run({
          id: row.id,
          to: 'SKIPPED',
          status_message: supersededMessage(revision),
          from: '["QUEUED"]',
          now,
        });
      }
      return { startedId: revision.id, skipped: older.map((row) => row.id as string) };
    })();
    return {
      started: outcome.startedId ? await this.getRevisionById(outcome.startedId) : null,
      skipped: outcome.skipped,
    };
  }

  async listUnfinishedRevisions(): Promise<RevisionRecord[]> {
    const rows = this.sql(`SELECT * FROM revisions WHERE status NOT IN (${TERMINAL}) ORDER BY seq`)
      .all() as Row[];
    return rows.map((row) => toRevision(row));
  }

  async takeOverRevisions(lease: WorkLease, staleBefore: string, limit: number): Promise<Array<Pick<RevisionRecord, 'id' | 'deployment_id'>>> {
    // One transaction, so one writer: a revision another call took in between is held by a live process.
    return this.db.transaction(() => {
      const { owner } = lease;
      if (this.sql(LEASE_QUERIES.renewProcessLease).run({ owner, until: lease.until, now: lease.now }).changes === 0) return [];
      const taken: Array<Pick<RevisionRecord, 'id' | 'deployment_id'>> = [];
      for (const { process_id: dead } of this.sql(LEASE_QUERIES.deadProcesses).all({ owner, now: lease.now }) as Array<{ process_id: string }>) {
        const wanted = limit - taken.length;
        if (wanted <= 0) break;
        const rows = this.sql(LEASE_QUERIES.takeOverFromProcess).all({ owner, dead, limit: wanted }) as Array<Pick<RevisionRecord, 'id' | 'deployment_id'>>;
        taken.push(...rows);
        if (rows.length < wanted) this.sql(LEASE_QUERIES.forgetProcess).run({ dead });
      }
      if (taken.length < limit) taken.push(...(this.sql(LEASE_QUERIES.takeOverUnheld).all({ owner, stale_before: staleBefore, limit: limit - taken.length }) as Array<Pick<RevisionRecord, 'id' | 'deployment_id'>>));
      return taken;
    })();
  }

  async renewProcessLease(lease: WorkLease): Promise<boolean> {
    const params = { owner: lease.owner, until: lease.until, now: lease.now };
    if (this.sql(LEASE_QUERIES.renewProcessLease).run(params).changes === 1) return true;
    this.sql(LEASE_QUERIES.restartProcessLease).run(params);
    return false;
  }

  async endProcessLease(owner: string, now: string): Promise<void> {
    this.sql(LEASE_QUERIES.endProcessLease).run({ owner, now });
  }

  async holdRevisions(ids: readonly string[], owner: string): Promise<string[]> {
    if (ids.length === 0) return [];
    const rows = this.sql(LEASE_QUERIES.holdRevisions).all({ owner, ids: JSON.stringify(ids) }) as Array<{ id: string }>;
    return rows.map((row) => row.id);
  }

  async releaseRevisions(ids: readonly string[], owner: string): Promise<void> {
    if (ids.length > 0) this.sql(LEASE_QUERIES.releaseRevisions).run({ owner, ids: JSON.stringify(ids) });
  }

  async listStalledQueuedDeployments(): Promise<string[]> {
    const rows = this.sql(LEASE_QUERIES.stalledQueuedDeployments).all() as Array<{ deployment_id: string }>;
    return rows.map((row) => row.deployment_id);
  }

  async appendLogs(revisionId: string, entries: Array<{ type: LogType; level: LogLevel; message: string }>, now: string): Promise<void> {
    this.db.transaction(() => {
      for (const entry of entries) this.#stmt.insertLog.run(revisionId, entry.type, entry.level, entry.message, now);
    })();
  }

  async readLogs(revisionId: string, type: LogType, afterSeq: number, limit: number): Promise<{ logs: LogEntry[]; lastSeq: number | null; more: boolean }> {
    const rows = this.#stmt.readLogs.all(revisionId, type, afterSeq, limit + 1) as Array<{ seq: number; timestamp: string; level: LogLevel; message: string }>;
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
    if (filter.query) where.push("message LIKE @query ESCAPE '\\'");
    if (filter.startTime) where.push('timestamp >= @start_time');
    if (filter.endTime) where.push('timestamp <= @end_time');
    const rows = this.sql(
        `SELECT seq, timestamp, level, message FROM revision_logs WHERE ${where.join(' AND ')}
         ORDER BY seq ${filter.order === 'asc' ? 'ASC' : 'DESC'} LIMIT @limit`,
      )
      .all({
        revision_id: revisionId,
        type: filter.type,
        cursor: filter.cursor,
        level: filter.level ?? null,
        query: filter.query ? `%${escapeLike(filter.query)}%` : null,
        start_time: filter.startTime ?? null,
        end_time: filter.endTime ?? null,
        limit: filter.limit + 1,
      }) as Array<LogEntry & { seq: number }>;
    return { logs: rows.slice(0, filter.limit), more: rows.length > filter.limit };
  }

  // ------------------------------------------------------------ listeners

  async createListener(input: Listener): Promise<void> {
    try {
      this.sql(
          `INSERT INTO listeners (id, tenant_id, version, compute_type, compute_id, compute_config, created_at, updated_at)
           VALUES (@id, @tenant_id, @version, @compute_type, @compute_id, @compute_config, @created_at, @updated_at)`,
        )
        .run({ ...input, compute_config: JSON.stringify(input.compute_config) });
    } catch (error) {
      if (isUniqueViolation(error)) throw new Conflict(`A listener with compute_id '${input.compute_id}' already exists in this workspace.`);
      throw error;
    }
  }

  async getListener(tenantId: string, id: string): Promise<ListenerRecord | null> {
    const row = this.sql('SELECT * FROM listeners WHERE id = ? AND tenant_id = ?').get(id, tenantId) as Row | undefined;
    return row ? toListener(row) : null;
  }

  async servingComputeType(tenantId: string, listenerId: string | null): Promise<ComputeType | null> {
    const row = this.#stmt.servingComputeType.get(tenantId, listenerId, tenantId) as { compute_type: ComputeType } | undefined;
    return row?.compute_type ?? null;
  }

  async getListenerById(id: string): Promise<ListenerRecord | null> {
    const row = this.sql('SELECT * FROM listeners WHERE id = ?').get(id) as Row | undefined;
    return row ? toListener(row) : null;
  }

  async listListeners(tenantId: string, limit: number, offset: number): Promise<Page<ListenerRecord>> {
    const rows = this.sql('SELECT * FROM listeners WHERE tenant_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?')
      .all(tenantId, limit, offset) as Row[];
    return { resources: rows.map(toListener), offset: offset + rows.length };
  }

  async updateListener(tenantId: string, id: string, computeConfig: ComputeConfig, now: string, version?: string | null): Promise<ListenerRecord | null> {
    const result = this.sql('UPDATE listeners SET compute_config = ?, version = coalesce(?, version), updated_at = ? WHERE id = ? AND tenant_id = ?')
      .run(JSON.stringify(computeConfig), version ?? null, now, id, tenantId);
    return result.changes === 1 ? this.getListener(tenantId, id) : null;
  }

  async deleteListener(tenantId: string, id: string): Promise<'deleted' | 'not_found' | 'in_use'> {
    const { db } = this;
    return db.transaction((): 'deleted' | 'not_found' | 'in_use' => {
      if (!this.sql('SELECT 1 FROM listeners WHERE id = ? AND tenant_id = ?').get(id, tenantId)) return 'not_found';
      if (this.sql('SELECT 1 FROM deployments WHERE listener_id = ? LIMIT 1').get(id)) return 'in_use';
      this.sql('DELETE FROM listeners WHERE id = ?').run(id);
      return 'deleted';
    })();
  }

  // ------------------------------------------------------------ GitHub integrations

  async createIntegration(input: IntegrationRecord): Promise<void> {
    const { db } = this;
    try {
      db.transaction(() => {
        // An installation belongs to one GitHub account, so to one organization here: the first to
        // link it owns it, and no other organization can claim it (or read its deliveries).
        const owner = this.sql(
            `SELECT w.organization_id FROM github_integrations g JOIN workspaces w ON w.id = g.tenant_id
             WHERE g.installation_id = ? AND w.organization_id <> (SELECT organization_id FROM workspaces WHERE id = ?) LIMIT 1`,
          )
          .get(input.installation_id, input.tenant_id);
        if (owner) throw new Conflict(`Installation ${input.installation_id} is linked to another organization.`);
        this.sql('INSERT INTO github_integrations (id, tenant_id, installation_id, name, suspended_at, created_at) VALUES (?, ?, ?, ?, NULL, ?)').run(
          input.id,
          input.tenant_id,
          input.installation_id,
          input.name,
          input.created_at,
        );
      })();
    } catch (error) {
      if (isUniqueViolation(error)) throw new Conflict(`Installation ${input.installation_id} is already linked to this workspace.`);
      throw error;
    }
  }

  async getIntegration(tenantId: string, id: string): Promise<IntegrationRecord | null> {
    const row = this.sql('SELECT * FROM github_integrations WHERE id = ? AND tenant_id = ?').get(id, tenantId) as Row | undefined;
    return row ? toIntegration(row) : null;
  }

  async listIntegrations(tenantId: string): Promise<IntegrationRecord[]> {
    const rows = this.sql('SELECT * FROM github_integrations WHERE tenant_id = ? ORDER BY created_at, rowid').all(tenantId) as Row[];
    return rows.map(toIntegration);
  }

  async deleteIntegration(tenantId: string, id: string): Promise<boolean> {
    return this.sql('DELETE FROM github_integrations WHERE id = ? AND tenant_id = ?').run(id, tenantId).changes === 1;
  }

  async getIntegrationById(id: string): Promise<IntegrationRecord | null> {
    const row = this.#stmt.integrationById.get(id) as Row | undefined;
    return row ? toIntegration(row) : null;
  }

  async removeInstallation(installationId: number): Promise<IntegrationRecord[]> {
    const { db } = this;
    return db.transaction((): IntegrationRecord[] => {
      const rows = this.sql('SELECT * FROM github_integrations WHERE installation_id = ?').all(installationId) as Row[];
      this.sql('DELETE FROM github_integrations WHERE installation_id = ?').run(installationId);
      return rows.map(toIntegration);
    })();
  }

  async setInstallationSuspended(installationId: number, suspendedAt: string | null): Promise<IntegrationRecord[]> {
    const { db } = this;
    return db.transaction((): IntegrationRecord[] => {
      this.sql('UPDATE github_integrations SET suspended_at = ? WHERE installation_id = ?').run(suspendedAt, installationId);
      return (this.sql('SELECT * FROM github_integrations WHERE installation_id = ?').all(installationId) as Row[]).map(toIntegration);
    })();
  }

  // ------------------------------------------------------------ tracing projects

  async getTracingProject(tenantId: string, id: string): Promise<TracingProject | null> {
    const row = this.sql('SELECT * FROM tracing_projects WHERE id = ? AND tenant_id = ?').get(id, tenantId) as Row | undefined;
    return row ? toTracingProject(row) : null;
  }

  async listTracingProjects(tenantId: string, name: string | undefined, limit: number, offset: number): Promise<Page<TracingProject>> {
    const rows = this.sql(
        `SELECT * FROM tracing_projects WHERE tenant_id = @tenant_id AND (@name IS NULL OR name = @name)
         ORDER BY created_at DESC, rowid DESC LIMIT @limit OFFSET @offset`,
      )
      .all({ tenant_id: tenantId, name: name ?? null, limit, offset }) as Row[];
    return { resources: rows.map(toTracingProject), offset: offset + rows.length };
  }

}

/** Why a queued revision was skipped; a push names the commit that superseded it, so a burst reads clearly. */
function supersededMessage(newer: RevisionRecord): string {
  const sha = newer.source_revision_config.repo_commit_sha;
  if (newer.trigger === 'push' && sha) {
    return `Superseded by revision ${newer.id} (push of commit ${sha.slice(0, 12)}), which was created later: only the newest queued revision is built.`;
  }
  return `Superseded by revision ${newer.id}, which was created later.`;
}
