import { z } from 'zod';
import { PageQuery, Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

/** What a delivery did to one deployment (push) or one linked integration (installation). */
export const WebhookDeliveryResultKind = lazySchema(() =>
  z.enum(['revision_created', 'skipped', 'integration_removed', 'integration_suspended', 'integration_unsuspended']),
);
export type WebhookDeliveryResultKind = z.infer<typeof WebhookDeliveryResultKind>;

export const WebhookDeliveryResult = lazySchema(() =>
  z.object({
    deployment_id: Uuid.nullable(),
    deployment_name: z.string().nullable(),
    integration_id: Uuid.nullable(),
    result: WebhookDeliveryResultKind,
    /** The revision created, or the one that already covered the commit. */
    revision_id: Uuid.nullable(),
    /** Why, in a sentence: always set for `skipped`. */
    reason: z.string().nullable(),
  }),
);
export type WebhookDeliveryResult = z.infer<typeof WebhookDeliveryResult>;

/**
 * `pending`: stored, not processed yet. `revisions_created`: at least one deployment of this
 * workspace got a revision. `no_revision`: a push that built nothing here (see `reason` and
 * `results`). `applied`: an installation event that changed integrations. `ignored`: an event this
 * server does not act on (or a ping). `failed`: processing failed repeatedly (see the server log).
 */
export const WebhookDeliveryOutcome = lazySchema(() => z.enum(['pending', 'revisions_created', 'no_revision', 'applied', 'ignored', 'failed']));
export type WebhookDeliveryOutcome = z.infer<typeof WebhookDeliveryOutcome>;

/** An item of `GET /v1/webhooks/github/deliveries`: what one delivery did, as this workspace may see it. */
export const WebhookDelivery = lazySchema(() =>
  z.object({
    delivery_id: z.string(),
    event: z.string(),
    action: z.string().nullable(),
    installation_id: z.int().nullable(),
    repository: z.string().nullable(),
    ref: z.string().nullable(),
    after: z.string().nullable(),
    received_at: Timestamp,
    processed_at: Timestamp.nullable(),
    outcome: WebhookDeliveryOutcome,
    /** Why nothing was built, when one reason covers the whole delivery. */
    reason: z.string().nullable(),
    results: z.array(WebhookDeliveryResult),
  }),
);
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const WebhookDeliveryListQuery = lazySchema(() =>
  PageQuery.extend({
    event: z.string().max(100).optional(),
    /** The `X-GitHub-Delivery` id GitHub shows under the webhook's "Recent Deliveries". */
    delivery_id: z.string().max(200).optional(),
  }),
);
export type WebhookDeliveryListQuery = z.infer<typeof WebhookDeliveryListQuery>;

/** The answer to an accepted delivery. */
export const WebhookAccepted = lazySchema(() => z.object({ delivery_id: z.string(), status: z.enum(['queued', 'pong']) }));
export type WebhookAccepted = z.infer<typeof WebhookAccepted>;
