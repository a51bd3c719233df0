import { ProjectLogs, ProjectLogsRequest } from '../../shared/schemas/revision.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { pathId, readJson } from '../http/validation.ts';

/** The log routes at the paths `langgraph deploy logs` calls; `{project_id}` is the deployment's id. */
export function projectLogRoutes(ctx: RouteContext): void {
  const { revisions } = ctx.services;
  const tag = 'revisions';
  const base = '/v1/projects/:project_id';
  const body = async (c: Parameters<Parameters<typeof route>[2]>[0]) => {
    // Every field is optional, so an empty body (no Content-Type) is an empty request.
    if (!c.req.header('content-type') && (c.req.header('content-length') ?? '0') === '0') return ProjectLogsRequest.parse({});
    return readJson(c, ProjectLogsRequest);
  };
  for (const type of ['build', 'deploy'] as const) {
    route(
      ctx,
      {
        auth: 'api-key',
        method: 'post',
        path: `${base}/revisions/:revision_id/${type}_logs`,
        summary: `${type === 'build' ? 'Build' : 'Deploy'} log lines of a revision (langgraph deploy logs)`,
        tag,
        body: ProjectLogsRequest,
        response: { status: 200, schema: ProjectLogs },
      },
      async (c) => {
        const projectId = pathId(c, 'project_id');
        const revisionId = pathId(c, 'revision_id');
        return c.json(await revisions.projectLogs(c.get('principal').workspaceId, projectId, revisionId, type, await body(c)));
      },
    );
  }
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: `${base}/deploy_logs`,
      summary: "Deploy log lines of the deployment's live revision (langgraph deploy logs)",
      tag,
      body: ProjectLogsRequest,
      response: { status: 200, schema: ProjectLogs },
    },
    async (c) => {
      const projectId = pathId(c, 'project_id');
      return c.json(await revisions.projectLogs(c.get('principal').workspaceId, projectId, null, 'deploy', await body(c)));
    },
  );
}
