import { page } from '../../shared/schemas/common.ts';
import { TracingProject, TracingProjectListQuery } from '../../shared/schemas/tracing-project.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

export function tracingProjectRoutes(ctx: RouteContext): void {
  const { tracingProjects } = ctx.services;
  const tag = 'tracing-projects';
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/tracing-projects',
      summary: 'List tracing projects',
      tag,
      query: TracingProjectListQuery,
      response: { status: 200, schema: page(TracingProject) },
    },
    async (c, { query }) => c.json(await tracingProjects.list(c.get('principal').workspaceId, query)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/tracing-projects/:project_id',
      summary: 'Get a tracing project',
      tag,
      response: { status: 200, schema: TracingProject },
    },
    async (c, { params }) => c.json(await tracingProjects.get(c.get('principal').workspaceId, params.project_id)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: '/v1/tracing-projects/:project_id',
      summary: 'Delete a tracing project that no deployment holds',
      tag,
      response: { status: 204, schema: null },
    },
    async (c, { params }) => {
      await tracingProjects.delete(c.get('principal').workspaceId, params.project_id);
      return c.body(null, 204);
    },
  );
}
