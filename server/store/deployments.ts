import { normalizeRepoUrl } from '../../shared/repo-url.ts';
import type { DeploymentListQuery, SourceConfig, SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { Secret } from '../../shared/schemas/secret.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Db, Dialect, Statement } from './db.ts';
import { escapeLike } from './dialect.ts';
import { type HotQueries, hotQueries } from './queries/hot-paths.ts';
import { insertRevision, revisionStatements } from './revisions.ts';
import { type Row, sealedIfSame, toDeployment, toRevision } from './rows.ts';
import { NO_RULES, type StoreRules } from './rules.ts';
import { SqlStore } from './sql-store.ts';
import { tracingProjectStatements } from './tracing-projects.ts';
import type { CreatedDeployment, DeploymentChange, DeploymentRecord, NewDeployment, Page, RevisionRecord } from './types.ts';

/**
 * Positional (`?`, the values an array in this order): better-sqlite3 binds an object's values by
 * looking each name up through N-API, ~1,000 instructions a value more than an array spread into
 * the call (docs/decisions/hot-paths-round-9-create.md).
 */
const INSERT_DEPLOYMENT = `INSERT INTO deployments (id, tenant_id, name, source, source_config, source_revision_config, secrets, status,
    latest_revision_id, active_revision_id, image_version, deployment_type, integration_id, listener_id,
    repo_url_key, repo_ref, build_on_push, created_at, updated_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** A deployment's JSON and query columns, as `deploymentColumns` derives them. */
type DeploymentColumns = {
  source_config: string;
  source_revision_config: string;
  secrets: string;
  deployment_type: SourceConfig['deployment_type'];
  build_on_push: 0 | 1;
  repo_ref: string | null;
};

/** A create's statements; `revision` is the one whose RETURNING says whether the revision names its runner. */
export type CreateStatements = Statement[] & { revision?: Statement };

/** The rows of a create, in order, as one list both write paths run: PostgreSQL's transaction and SQLite's grouped commit. */
export function createStatements(hot: HotQueries, box: SecretBox, input: NewDeployment): CreateStatements {
  const { deployment: d, revision, tracingProject: tp, runner } = input;
  const cols = deploymentColumns(box, d.source_config, d.source_revision_config, d.secrets);
  const statements: CreateStatements = [
    {
      sql: INSERT_DEPLOYMENT,
      params: [
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
    },
  ];
  if (revision) {
    const insert = revisionStatements(hot, box, {
      deploymentId: d.id,
      tenantId: d.tenant_id,
      source: d.source,
      revision,
      now: d.created_at,
      sealedSecrets: sealedIfSame(revision.secrets, d.secrets, cols.secrets),
      runner,
    });
    statements.revision = insert[0];
    statements.push(...insert);
  }
  statements.push(...tracingProjectStatements(tp));
  return statements;
}

/** A create's failure as the caller should see it: a name taken is the domain's refusal. */
export function createRefused(dialect: Dialect, rules: StoreRules, input: NewDeployment, error: unknown): unknown {
  return dialect.isUniqueViolation(error) ? rules.refusal({ kind: 'deployment_name_taken', name: input.deployment.name }) : error;
}

/** The JSON and query columns derived from a deployment's current config. */
function deploymentColumns(box: SecretBox, sourceConfig: SourceConfig, revisionConfig: SourceRevisionConfig, secrets: Secret[]): DeploymentColumns {
  return {
    source_config: JSON.stringify(sourceConfig),
    source_revision_config: JSON.stringify(revisionConfig),
    secrets: box.encryptJson(secrets),
    deployment_type: sourceConfig.deployment_type,
    build_on_push: sourceConfig.build_on_push ? 1 : 0,
    repo_ref: revisionConfig.repo_ref,
  };
}

/** Deployments: their create (with the first revision and the tracing project), reads, updates and the mark of a delete. */
export interface DeploymentStore {
  createDeployment(input: NewDeployment): Promise<CreatedDeployment>;
  getDeployment(tenantId: string, id: string): Promise<DeploymentRecord | null>;
  getDeploymentById(id: string): Promise<DeploymentRecord | null>;
  listDeployments(tenantId: string, query: DeploymentListQuery): Promise<Page<DeploymentRecord>>;
  /**
   * Reads the deployment, lets `plan` decide the change (it may throw to abort), and writes the
   * change in the same transaction, so concurrent updates never overlay a stale config.
   */
  updateDeployment(
    tenantId: string,
    id: string,
    plan: (current: DeploymentRecord) => DeploymentChange,
    now: string,
  ): Promise<{ deployment: DeploymentRecord; revision: RevisionRecord | null }>;
  /** Marks the deployment AWAITING_DELETE; `marked` is false when it already was (or null when it does not exist). */
  markDeploymentDeleting(
    tenantId: string,
    id: string,
    deleteTracingProject: boolean,
    now: string,
  ): Promise<{ deployment: DeploymentRecord; marked: boolean } | null>;

  /** Every `github` deployment of a repository (compared by `normalizeRepoUrl`), whatever its branch. */
  listDeploymentsByRepo(repoUrlKey: string): Promise<DeploymentRecord[]>;
  /** `github` deployments with `build_on_push` that are not being deleted. */
  listBuildOnPushDeployments(): Promise<DeploymentRecord[]>;
}

/**
 * Deployments on either database. Read-modify-write methods lock the deployment row they start
 * from (`forUpdate`), which serializes them per deployment on PostgreSQL as SQLite's single writer does.
 */
export class SqlDeploymentStore extends SqlStore implements DeploymentStore {
  protected readonly box: SecretBox;
  protected readonly hot: HotQueries;

  constructor(db: Db, box: SecretBox, rules: StoreRules = NO_RULES) {
    super(db, rules);
    this.box = box;
    this.hot = hotQueries(db.dialect);
  }

  async createDeployment(input: NewDeployment): Promise<CreatedDeployment> {
    let revisionHeld: boolean;
    try {
      revisionHeld = await this.writeCreate(createStatements(this.hot, this.box, input));
    } catch (error) {
      throw createRefused(this.sql.dialect, this.rules, input, error);
    }
    // What was written, as written: no need to read it back and decrypt it again.
    return { deployment: { ...input.deployment, delete_tracing_project: false }, revisionHeld };
  }

  /** Writes a create's statements in one transaction; answers whether its revision names its runner (`NewDeployment.runner`). */
  protected async writeCreate(statements: CreateStatements): Promise<boolean> {
    let revisionHeld = false;
    await this.sql.tx(async (tx) => {
      for (const statement of statements) {
        if (statement === statements.revision) revisionHeld = (await tx.row<{ runner_id: string | null }>(statement.sql, statement.params))!.runner_id !== null;
        else await tx.run(statement.sql, statement.params);
      }
    });
    return revisionHeld;
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
      const cols = deploymentColumns(this.box, change.source_config, change.source_revision_config, change.secrets);
      await tx.run(
        `UPDATE deployments SET source_config = @source_config, source_revision_config = @source_revision_config,
           secrets = @secrets, deployment_type = @deployment_type, build_on_push = @build_on_push, repo_ref = @repo_ref,
           latest_revision_id = coalesce(@latest_revision_id, latest_revision_id), updated_at = @now
         WHERE id = @id`,
        { id, now, latest_revision_id: change.revision?.id ?? null, ...cols },
      );
      if (change.revision)
        await insertRevision(tx, this.hot, this.box, {
          deploymentId: id,
          tenantId,
          source: row.source as string,
          revision: change.revision,
          now,
          sealedSecrets: sealedIfSame(change.revision.secrets, change.secrets, cols.secrets),
        });
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
}
