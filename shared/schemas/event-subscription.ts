import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

/** The events a subscription may ask for (contract §17); `*` is every one, including later ones. */
export const EVENT_TYPES = ['deployment.created', 'deployment.deleted', 'revision.status_changed'] as const;

export const EventSubscriptionCreate = lazySchema(() =>
  z.strictObject({
    url: z.url({ protocol: /^https?$/, message: 'url must be an http(s) URL' }).max(2048),
    events: z
      .array(z.enum([...EVENT_TYPES, '*']))
      .min(1)
      .max(EVENT_TYPES.length + 1),
    format: z.enum(['standard', 'slack']).default('standard'),
  }),
);
export type EventSubscriptionCreate = z.infer<typeof EventSubscriptionCreate>;

export const EventSubscription = lazySchema(() =>
  z.object({
    id: Uuid,
    tenant_id: Uuid,
    url: z.string(),
    events: z.array(z.string()),
    format: z.enum(['standard', 'slack']),
    created_at: Timestamp,
  }),
);
export type EventSubscription = z.infer<typeof EventSubscription>;

/** The creation's answer: the only time the signing secret is shown. */
export const EventSubscriptionCreated = lazySchema(() => EventSubscription.extend({ secret: z.string() }));

export const EventDeliveryView = lazySchema(() =>
  z.object({
    id: z.int(),
    event: z.string(),
    deployment_id: z.string(),
    revision_id: z.string().nullable(),
    status: z.string().nullable(),
    state: z.enum(['pending', 'delivered', 'failed']),
    outcome: z.string().nullable(),
    created_at: Timestamp,
    attempts: z.array(z.object({ attempt: z.int(), response_status: z.int().nullable(), error: z.string().nullable(), attempted_at: Timestamp })),
  }),
);
