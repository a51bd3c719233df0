import type { TracingProject, TracingProjectListQuery } from '../../shared/schemas/tracing-project.ts';
import type { Page, TracingProjectStore } from '../store/types.ts';
import { Conflict, NotFound } from './errors.ts';

/** Tracing projects: one is made with each deployment, under the same name. */
export class TracingProjects {
  private readonly deps: { store: TracingProjectStore };

  constructor(deps: { store: TracingProjectStore }) {
    this.deps = deps;
  }

  async get(tenantId: string, id: string): Promise<TracingProject> {
    const project = await this.deps.store.getTracingProject(tenantId, id);
    if (!project) throw new NotFound(`Tracing project ID ${id} not found.`);
    return project;
  }

  /**
   * Deletes a tracing project no deployment holds (one a deleted deployment left behind). The
   * project of a live deployment goes with it: `DELETE /v2/deployments/{id}?delete_tracing_project=true`.
   */
  async delete(tenantId: string, id: string): Promise<void> {
    const outcome = await this.deps.store.deleteTracingProject(tenantId, id);
    if (outcome === 'not_found') throw new NotFound(`Tracing project ID ${id} not found.`);
    if (outcome !== 'deleted') {
      throw new Conflict(
        `Tracing project ID ${id} belongs to deployment ${outcome.deploymentId}; it is deleted with it: DELETE /v2/deployments/${outcome.deploymentId}?delete_tracing_project=true.`,
      );
    }
  }

  list(tenantId: string, query: TracingProjectListQuery): Promise<Page<TracingProject>> {
    return this.deps.store.listTracingProjects(tenantId, query.name, query.limit, query.offset);
  }
}
