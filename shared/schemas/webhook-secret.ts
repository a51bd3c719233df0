import { z } from 'zod';
import { Timestamp } from './common.ts';
import { lazySchema } from './lazy.ts';

/** A workspace's repository-webhook secret, as `GET /v1/webhooks/github/secret` shows it: never the value. */
export const WebhookSecretStatus = lazySchema(() =>
  z.object({
    /** The Payload URL to enter in GitHub: this workspace's own delivery endpoint. */
    payload_url: z.string(),
    created_at: Timestamp,
    /** Until when the secret this one replaced is still accepted; null when none is. */
    previous_secret_valid_until: Timestamp.nullable(),
  }),
);
export type WebhookSecretStatus = z.infer<typeof WebhookSecretStatus>;

/** The answer to `POST /v1/webhooks/github/secret`: the only time the secret is shown. */
export const WebhookSecretCreated = lazySchema(() => WebhookSecretStatus.extend({ secret: z.string() }));
export type WebhookSecretCreated = z.infer<typeof WebhookSecretCreated>;
