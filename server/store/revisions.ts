import type { SourceRevisionConfig } from '../../shared/schemas/deployment.ts';
import type { RevisionListQuery, RevisionStatus } from '../../shared/schemas/revision.ts';
import type { Secret } from '../../shared/schemas/secret.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { currentTraceparent } from '../lib/request-scope.ts';
import { auditMachineChange } from './audit.ts';
import { type Db, rowThen, type Statement } from './db.ts';
import { type HotQueries, hotQueries, SET_RECONCILE_HEAD } from './queries/hot-paths.ts';
import { TERMINAL } from './queries/statuses.ts';
import { INSERT_LOG } from './revision-logs.ts';
import { toDeployment, toRevision } from './rows.ts';
import { NO_RULES, type StartRules, type StoreRules } from './rules.ts';
import { SqlStore } from './sql-store.ts';
import type {
  DeploymentRecord,
  NewRevision,
  Page,
  PushRevisionInput,
  PushRevisionResult,
  RevisionRecord,
  RevisionRunner,
  RevisionTransition,
  RevisionWork,
  StartNextResult,
} from './types.ts';

/** A revision to insert, and the deployment it belongs to (see `revisionStatements`). */
export type RevisionInsert = {
  deploymentId: string;
  tenantId: string;
  source: string;
  revision: NewRevision;
  now: string;
  /** The revision's secrets already encrypted (the deployment's, in the same write). */
  sealedSecrets?: string;
  runner?: RevisionRunner;
};

/**
 * A new revision and the log lines written with it; the first statement answers `runner_id`.
 * Run by the writes of other resources too (a deployment's create and update), in their transaction.
 */
export function revisionStatements(hot: HotQueries, box: SecretBox, input: RevisionInsert): Statement[] {
  const { revision, runner, now } = input;
  return [
    {
      sql: hot.insertRevision,
      // In `hot.insertRevision`'s order (positional: see INSERT_DEPLOYMENT in deployments.ts).
      params: [
        revision.id,
        input.deploymentId,
        input.tenantId,
        revision.status ?? 'QUEUED',
        revision.status_message ?? null,
        input.source,
        JSON.stringify(revision.source_revision_config),
        revision.source_revision_config.repo_commit_sha ?? null,
        input.sealedSecrets ?? box.encryptJson(revision.secrets),
        revision.resource_spec ? JSON.stringify(revision.resource_spec) : null,
        revision.trigger,
        // The trace context of the work that makes it (a request, a delivery): see `RequestScope.traceparent`.
        revision.traceparent ?? currentTraceparent() ?? null,
        now,
        now,
        runner?.owner ?? null,
        runner?.now ?? null,
      ],
    },
    ...(revision.logs ?? []).map((log) => ({ sql: INSERT_LOG, params: [revision.id, log.type, log.level, log.message, now] })),
  ];
}

/** Inserts a revision in the caller's transaction `tx`. */
export async function insertRevision(tx: Db, hot: HotQueries, box: SecretBox, input: RevisionInsert): Promise<void> {
  for (const statement of revisionStatements(hot, box, input)) await tx.run(statement.sql, statement.params);
}

/** Revisions: reads, the pipeline's stage changes and starts, and the revisions pushes make. */
export interface RevisionStore {
  getRevision(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord | null>;
  /**
   * `getRevision` with a callback, called once: synchronously where the database reads at once
   * (SQLite outside a transaction, see `rowThen`). For the GET revision fast lane.
   */
  readRevision(tenantId: string, deploymentId: string, revisionId: string, done: (error: unknown, revision?: RevisionRecord | null) => void): void;
  getRevisionById(revisionId: string): Promise<RevisionRecord | null>;
  /** The revision with its secrets and resource spec, for the data plane and redeploys. */
  getRevisionWork(revisionId: string): Promise<RevisionWork | null>;
  /** The trace context stored with the revision (the request or delivery that made it); null when none came. */
  revisionTraceparent(revisionId: string): Promise<string | null>;
  listRevisions(tenantId: string, deploymentId: string, query: RevisionListQuery): Promise<Page<RevisionRecord>>;
  /** Applies the transition when the revision is in `from`; null when it had moved on. */
  transitionRevision(change: RevisionTransition, now: string): Promise<RevisionRecord | null>;
  /**
   * Reads the deployment's queue under its lock, lets the rules decide what starts and what is
   * skipped (`StartRules.planStart`, or the store's own rules when given only `firstStage`), and
   * writes that: the started revision moves to its first stage, the skipped ones to SKIPPED.
   */
  startNextRevision(deploymentId: string, start: StartRules | ((revision: RevisionRecord) => RevisionStatus), now: string): Promise<StartNextResult>;
  listUnfinishedRevisions(): Promise<RevisionRecord[]>;

  /**
   * In one transaction: unless a revision of this deployment for `commitSha` exists that has not
   * failed, adds a `push` revision (the deployment's latest config with that commit) as the latest
   * revision. Two deliveries of one push racing each other therefore create one revision.
   * With `headSeen`, the same transaction records the commit as the head of that branch for the
   * reconciler (`WebhookStore.setReconcileHead`) whatever the outcome, while the deployment exists:
   * one commit, not two, per deployment a push builds.
   */
  createPushRevision(input: PushRevisionInput): Promise<PushRevisionResult>;
}

/** Revisions on either database; `box` decrypts the secrets of the work the data plane is given. */
export class SqlRevisionStore extends SqlStore implements RevisionStore {
  readonly #box: SecretBox;
  readonly #hot = hotQueries(this.sql.dialect);

  constructor(db: Db, box: SecretBox, rules: StoreRules = NO_RULES) {
    super(db, rules);
    this.#box = box;
  }

  async getRevision(tenantId: string, deploymentId: string, revisionId: string): Promise<RevisionRecord | null> {
    // Inline, not through `first`: this is a hot path's read.
    const row = await this.sql.row(this.#hot.revision, [revisionId, deploymentId, tenantId]);
    return row ? toRevision(row) : null;
  }

  readRevision(tenantId: string, deploymentId: string, revisionId: string, done: (error: unknown, revision?: RevisionRecord | null) => void): void {
    rowThen(this.sql, this.#hot.revision, [revisionId, deploymentId, tenantId], toRevision, done);
  }

  async getRevisionById(revisionId: string): Promise<RevisionRecord | null> {
    // Inline, not through `first`: this is a hot path's read.
    const row = await this.sql.row(this.#hot.revisionById, [revisionId]);
    return row ? toRevision(row) : null;
  }

  async getRevisionWork(revisionId: string): Promise<RevisionWork | null> {
    const row = await this.sql.row(this.#hot.revisionById, [revisionId]);
    if (!row) return null;
    return {
      ...toRevision(row),
      secrets: this.#box.decryptJson<Secret[]>(row.secrets as string),
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
      const changed = await tx.run(this.#hot.transition, {
        id: change.revisionId,
        to: change.to,
        status_message: change.statusMessage ?? null,
        from: tx.dialect.list(change.from),
        now,
      });
      if (changed !== 1) return false;
      if (change.to === 'DEPLOYED') {
        const row = (await tx.row(this.#hot.revisionById, [change.revisionId]))!;
        await tx.run(this.#hot.markDeployed, { revision_id: change.revisionId, deployment_id: row.deployment_id, now });
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
      const deployment = await tx.row(`${this.#hot.deploymentById}${tx.dialect.forUpdate}`, [deploymentId]);
      if (!deployment) return { started: null, skipped: [] };
      const inProgress = (await tx.row<{ n: number }>(this.#hot.inProgressCount, [deploymentId]))!.n;
      const queued = inProgress > 0 ? [] : (await tx.rows(this.#hot.queued, [deploymentId])).map(toRevision);
      const plan = planStart({ deploymentStatus: deployment.status as DeploymentRecord['status'], inProgress, queued });
      const fromQueued = tx.dialect.list(['QUEUED']);
      if (plan.start) await tx.run(this.#hot.transition, { id: plan.start.id, to: firstStage(plan.start), status_message: null, from: fromQueued, now });
      for (const skip of plan.skip) await tx.run(this.#hot.transition, { id: skip.id, to: 'SKIPPED', status_message: skip.message, from: fromQueued, now });
      const started = plan.start ? toRevision((await tx.row(this.#hot.revisionById, [plan.start.id]))!) : null;
      return { started, skipped: plan.skip.map((skip) => skip.id) };
    });
  }

  async listUnfinishedRevisions(): Promise<RevisionRecord[]> {
    const rows = await this.sql.rows(`SELECT * FROM revisions WHERE status NOT IN (${TERMINAL}) ORDER BY seq`);
    return rows.map(toRevision);
  }

  async createPushRevision(input: PushRevisionInput): Promise<PushRevisionResult> {
    const attempt = () =>
      this.sql.tx(async (tx): Promise<PushRevisionResult | { outcome: 'created' }> => {
        // Locking the deployment serializes pushes of it; the unique index is the backstop.
        const row = await tx.row(`${this.#hot.deploymentById}${tx.dialect.forUpdate}`, [input.deploymentId]);
        if (!row) return { outcome: 'not_buildable', reason: 'the deployment no longer exists' };
        if (input.headSeen) await tx.run(SET_RECONCILE_HEAD, [input.deploymentId, input.headSeen.repoRef, input.commitSha, input.now]);
        if (row.status === 'AWAITING_DELETE') return { outcome: 'not_buildable', reason: 'the deployment is being deleted' };
        const existing = await tx.row<{ id: string; status: RevisionStatus }>(this.#hot.revisionOfCommit, [input.deploymentId, input.commitSha]);
        if (existing) return { outcome: 'exists', revisionId: existing.id, status: existing.status };
        const deployment = toDeployment(row, this.#box);
        const config: SourceRevisionConfig = { ...deployment.source_revision_config, repo_commit_sha: input.commitSha };
        await insertRevision(tx, this.#hot, this.#box, {
          deploymentId: deployment.id,
          tenantId: deployment.tenant_id,
          source: deployment.source,
          revision: {
            id: input.revisionId,
            trigger: 'push',
            source_revision_config: config,
            secrets: deployment.secrets,
            resource_spec: deployment.source_config.resource_spec ?? null,
          },
          now: input.now,
        });
        await tx.run(this.#hot.deploymentOnPush, [JSON.stringify(config), input.revisionId, input.now, deployment.id]);
        if (input.actor)
          await auditMachineChange(
            tx,
            deployment.tenant_id,
            { actor: input.actor, now: input.now },
            {
              action: 'create',
              resourceType: 'revision',
              resourceId: input.revisionId,
            },
          );
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
}
