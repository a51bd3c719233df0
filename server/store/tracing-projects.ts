import type { TracingProject } from '../../shared/schemas/tracing-project.ts';
import type { Statement } from './db.ts';
import { toTracingProject } from './rows.ts';
import { SqlStore } from './sql-store.ts';
import type { Page } from './types.ts';

/**
 * A new deployment takes over the tracing project its name left behind (a deployment deleted
 * without `delete_tracing_project`): the name is free again and its traces go on in the same project
 * (docs/decisions/deleted-deployment-names.md). Otherwise a new project is inserted. One statement,
 * where an UPDATE of the orphan and a guarded INSERT were two (hot-paths-round-5-create.md): a
 * project of that name that a deployment still holds is left as it is, and cannot be met here, since
 * projects are made only by creates, named as their deployment, and a held one's deployment still
 * has the name: the create's own deployment insert, before this one, is refused (409) first.
 */
const ADOPT_OR_INSERT_TRACING_PROJECT = `INSERT INTO tracing_projects (id, tenant_id, name, deployment_id, created_at) VALUES (?, ?, ?, ?, ?)
  ON CONFLICT (tenant_id, name) DO UPDATE SET deployment_id = excluded.deployment_id WHERE tracing_projects.deployment_id IS NULL`;

/** The statement that gives a new deployment its tracing project, in the deployment's create. */
export function tracingProjectStatements(project: TracingProject): Statement[] {
  const { id, tenant_id, name, deployment_id, created_at } = project;
  return [{ sql: ADOPT_OR_INSERT_TRACING_PROJECT, params: [id, tenant_id, name, deployment_id, created_at] }];
}

/** Deployments' tracing projects, which may outlive their deployment. */
export interface TracingProjectStore {
  getTracingProject(tenantId: string, id: string): Promise<TracingProject | null>;
  listTracingProjects(tenantId: string, name: string | undefined, limit: number, offset: number): Promise<Page<TracingProject>>;
  /** Deletes a project no deployment holds; one that a deployment holds is left, and its deployment named. */
  deleteTracingProject(tenantId: string, id: string): Promise<'deleted' | 'not_found' | { deploymentId: string }>;
}

export class SqlTracingProjectStore extends SqlStore implements TracingProjectStore {
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
