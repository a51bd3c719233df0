import { z } from 'zod';
import { EventDeliveryView, EventSubscription, EventSubscriptionCreate, EventSubscriptionCreated } from '../../shared/schemas/event-subscription.ts';
import type { EventSubscriptions } from '../domain/events.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

/** `/v1/event-subscriptions`: a workspace's receivers of outgoing events (contract §17). */
export function eventSubscriptionRoutes(ctx: RouteContext, subscriptions: EventSubscriptions): void {
  const tag = 'event-subscriptions';
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v1/event-subscriptions',
      summary: 'Subscribe a URL to deployment events; the signing secret is shown only in this answer',
      tag,
      bodyReading: { unknownFields: 'refuse' },
      body: EventSubscriptionCreate,
      response: { status: 201, schema: EventSubscriptionCreated },
    },
    async (c, { body }) => c.json(await subscriptions.create(c.get('principal').workspaceId, body), 201),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/event-subscriptions',
      summary: "List the workspace's event subscriptions",
      tag,
      response: { status: 200, schema: z.array(EventSubscription) },
    },
    async (c) => c.json(await subscriptions.list(c.get('principal').workspaceId)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: '/v1/event-subscriptions/:subscription_id',
      summary: 'Delete an event subscription',
      tag,
      response: { status: 204, schema: null },
    },
    async (c, { params }) => {
      await subscriptions.delete(c.get('principal').workspaceId, params.subscription_id);
      return c.body(null, 204);
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/event-subscriptions/:subscription_id/deliveries',
      summary: "A subscription's deliveries, newest first, with each attempt",
      tag,
      response: { status: 200, schema: z.array(EventDeliveryView) },
    },
    async (c, { params }) => c.json(await subscriptions.deliveries(c.get('principal').workspaceId, params.subscription_id)),
  );
}
