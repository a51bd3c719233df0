import { ProjectLogs, ProjectLogsRequest } from '../../shared/schemas/revision.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

/** The log routes at the paths `langgraph deploy logs` calls; `{project_id}` is the deployment's id. */
export function projectLogRoutes(ctx: RouteContext): void {
  const { revisions } = ctx.services;
  const tag = 'revisions';
  const base = '/v1/projects/:project_id';
  // Every field is optional, so a request without a body is an empty request.
  const logsBody = { body: ProjectLogsRequest, bodyReading: { emptyBody: 'empty-object' } } as const;
  for (const type of ['build', 'deploy'] as const) {
    route(
      ctx,
      {
        auth: 'api-key',
        method: 'post',
        path: `${base}/revisions/:revision_id/${type}_logs`,
        summary: `${type === 'build' ? 'Build' : 'Deploy'} log lines of a revision (langgraph deploy logs)`,
        tag,
        ...logsBody,
        response: { status: 200, schema: ProjectLogs },
      },
      async (c, { params, body }) => c.json(await revisions.projectLogs(c.get('principal').workspaceId, params.project_id, params.revision_id, type, body)),
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
      ...logsBody,
      response: { status: 200, schema: ProjectLogs },
    },
    async (c, { params, body }) => c.json(await revisions.projectLogs(c.get('principal').workspaceId, params.project_id, null, 'deploy', body)),
  );
}
