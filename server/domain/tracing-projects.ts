import type { TracingProject, TracingProjectListQuery } from '../../shared/schemas/tracing-project.ts';
import type { Page, Store } from '../store/types.ts';
import { NotFound } from './errors.ts';

/** Tracing projects: one is made with each deployment, under the same name. */
export class TracingProjects {
  private readonly deps: { store: Store };

  constructor(deps: { store: Store }) {
    this.deps = deps;
  }

  async get(tenantId: string, id: string): Promise<TracingProject> {
    const project = await this.deps.store.getTracingProject(tenantId, id);
    if (!project) throw new NotFound(`Tracing project ID ${id} not found.`);
    return project;
  }

  list(tenantId: string, query: TracingProjectListQuery): Promise<Page<TracingProject>> {
    return this.deps.store.listTracingProjects(tenantId, query.name, query.limit, query.offset);
  }
}
