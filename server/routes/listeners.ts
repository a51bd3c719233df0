import { PageQuery, page } from '../../shared/schemas/common.ts';
import { Listener, ListenerCreate, ListenerPatch } from '../../shared/schemas/listener.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

export function listenerRoutes(ctx: RouteContext): void {
  const { listeners } = ctx.services;
  const tag = 'listeners';
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v2/listeners',
      summary: 'List listeners',
      tag,
      query: PageQuery,
      response: { status: 200, schema: page(Listener) },
    },
    async (c, { query }) => c.json(await listeners.list(c.get('principal').workspaceId, query.limit, query.offset)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v2/listeners',
      summary: 'Register a listener',
      tag,
      body: ListenerCreate,
      response: { status: 201, schema: Listener },
    },
    async (c, { body }) => c.json(await listeners.create(c.get('principal').workspaceId, body), 201),
  );
  route(
    ctx,
    { auth: 'api-key', method: 'get', path: '/v2/listeners/:listener_id', summary: 'Get a listener', tag, response: { status: 200, schema: Listener } },
    async (c, { params }) => c.json(await listeners.get(c.get('principal').workspaceId, params.listener_id)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'patch',
      path: '/v2/listeners/:listener_id',
      summary: 'Update a listener',
      tag,
      body: ListenerPatch,
      response: { status: 200, schema: Listener },
    },
    async (c, { params, body }) => {
      const id = params.listener_id;
      return c.json(await listeners.patch(c.get('principal').workspaceId, id, body));
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: '/v2/listeners/:listener_id',
      summary: 'Delete a listener no deployment uses',
      tag,
      response: { status: 204, schema: null },
    },
    async (c, { params }) => {
      await listeners.delete(c.get('principal').workspaceId, params.listener_id);
      return c.body(null, 204);
    },
  );
}
