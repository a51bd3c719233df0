import { z } from 'zod';
import { ListenerToken, ListenerTokenCreated } from '../../shared/schemas/agent.ts';
import type { ListenerTokens } from '../domain/agents/listener-tokens.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

/** Agent credentials of a listener, managed with an API key (contract §9). */
export function listenerTokenRoutes(ctx: RouteContext, tokens: ListenerTokens): void {
  const tag = 'listeners';
  const base = '/v2/listeners/:listener_id/tokens';
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: base,
      summary: 'Create an agent token for the listener (shown once)',
      tag,
      response: { status: 201, schema: ListenerTokenCreated },
    },
    async (c, { params }) => {
      const created = await tokens.create(c.get('principal').workspaceId, params.listener_id);
      c.header('cache-control', 'no-store');
      return c.json(created, 201);
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: base,
      summary: "List the listener's agent tokens (without their values)",
      tag,
      response: { status: 200, schema: z.array(ListenerToken) },
    },
    async (c, { params }) => c.json(await tokens.list(c.get('principal').workspaceId, params.listener_id)),
  );
  route(
    ctx,
    { auth: 'api-key', method: 'delete', path: `${base}/:token_id`, summary: 'Revoke an agent token', tag, response: { status: 204, schema: null } },
    async (c, { params }) => {
      await tokens.revoke(c.get('principal').workspaceId, params.listener_id, params.token_id);
      return c.body(null, 204);
    },
  );
}
