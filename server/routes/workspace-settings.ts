import { Workspace, WorkspacePatch } from '../../shared/schemas/workspace.ts';
import type { DefaultListener } from '../domain/agents/default-listener.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

/** `PATCH /v1/workspaces/{id}`: the workspace's default listener. */
export function workspaceSettingsRoutes(ctx: RouteContext, defaults: DefaultListener): void {
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'patch',
      path: '/v1/workspaces/:workspace_id',
      summary: "Set the workspace's default listener (null: back to its sandbox listener)",
      tag: 'workspaces',
      bodyReading: { unknownFields: 'refuse' },
      body: WorkspacePatch,
      response: { status: 200, schema: Workspace },
    },
    async (c, { params, body }) => {
      const id = params.workspace_id;
      return c.json(await defaults.patch(c.get('principal'), id, body));
    },
  );
}
