import { createHmac } from 'node:crypto';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Clock } from '../lib/clock.ts';
import { PolledWorker } from '../lib/poll-loop.ts';
import type { Logger } from '../logger.ts';
import type { EventDelivery, EventStore, EventSubscriptionRecord } from '../store/events.ts';
import type { OutboundPolicy } from './oauth/outbound.ts';
import { post } from './oauth/token-request.ts';

/** Deliveries looked at per pass (each the first pending one of its subscription and deployment). */
const BATCH = 50;
/** How long a delivery is retried before it is given up (contract §17). */
const RETRY_FOR_MS = 24 * 3_600_000;
/** The longest wait between two attempts. */
const MAX_BACKOFF_MS = 3_600_000;

export type EventSenderDeps = {
  store: EventStore;
  secretBox: SecretBox;
  policy: OutboundPolicy;
  clock: Clock;
  log: Logger;
  /** Whether this process sends now: one process at a time on one database. */
  lead?: () => Promise<boolean>;
  pollMs?: number;
};

type Due = EventDelivery & { subscription: EventSubscriptionRecord };

/** The Standard Webhooks signature: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed with the secret's bytes. */
export function standardSignature(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The event as the receiver reads it: Standard Webhooks' `{type, timestamp, data}`. */
export function eventPayload(delivery: EventDelivery): { type: string; timestamp: string; data: Record<string, unknown> } {
  const data: Record<string, unknown> = { deployment_id: delivery.deployment_id };
  if (delivery.revision_id) data.revision_id = delivery.revision_id;
  if (delivery.status) data.status = delivery.status;
  return { type: delivery.event, timestamp: delivery.created_at, data };
}

function slackText(delivery: EventDelivery): string {
  if (delivery.event === 'revision.status_changed') return `Revision ${delivery.revision_id} of deployment ${delivery.deployment_id} is now ${delivery.status}`;
  if (delivery.event === 'deployment.created') return `Deployment ${delivery.deployment_id} was created`;
  return `Deployment ${delivery.deployment_id} is being deleted`;
}

/**
 * Sends the outgoing-event outbox (contract §17) that the triggers of migration 025 fill in the
 * transaction of each change: at least once, in order per (subscription, deployment) (a delivery
 * waits until the one before it is through), one process at a time, retried with exponential
 * backoff for 24 hours. The `webhook-id` is the same on every attempt, so a receiver can drop a
 * repeat. Connections go to the address the outbound policy checked (DNS rebinding cannot swap it).
 */
export class EventSender extends PolledWorker {
  readonly #deps: EventSenderDeps;

  constructor(deps: EventSenderDeps) {
    super({
      intervalMs: deps.pollMs ?? 500,
      lead: deps.lead,
      onError: (error) => deps.log.error('events: the outbox pass failed; it runs again', { error: String(error) }),
    });
    this.#deps = deps;
  }

  protected async pass(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      const due = await this.#deps.store.due(this.#deps.clock.now(), BATCH);
      // Different (subscription, deployment) pairs go out side by side; each pair's own order is kept by `due`.
      const delivered = await Promise.all(due.map((delivery) => this.#send(delivery)));
      if (!delivered.some(Boolean)) return;
    }
  }

  /** One attempt; answers whether the delivery is through (so the next one of its pair may go). */
  async #send(delivery: Due): Promise<boolean> {
    const { store, clock, log } = this.#deps;
    const attempt = delivery.attempts + 1;
    const attemptedAt = clock.now();
    let responseStatus: number | null = null;
    let error: string | null = null;
    try {
      const { body, headers } = this.#request(delivery, Math.floor(Date.parse(attemptedAt) / 1000));
      const answer = await post(new URL(delivery.subscription.url), headers, body, this.#deps.policy);
      responseStatus = answer.status;
      if (answer.status < 200 || answer.status > 299) error = `the receiver answered ${answer.status}`;
    } catch (cause) {
      error = (cause as Error).message;
    }
    const attemptRecord = { attempt, response_status: responseStatus, error, attempted_at: attemptedAt };
    if (error === null) {
      await store.recordAttempt(delivery.id, attemptRecord, 'delivered', true, null);
      return true;
    }
    const now = Date.parse(attemptedAt);
    if (now - Date.parse(delivery.created_at) >= RETRY_FOR_MS) {
      log.warn('events: a delivery was given up after 24 hours of attempts', { subscription_id: delivery.subscription_id, delivery_id: delivery.id, error });
      await store.recordAttempt(delivery.id, attemptRecord, `given up: ${error}`, true, null);
      return true;
    }
    const backoff = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** Math.min(delivery.attempts, 20)) * (0.5 + Math.random() / 2);
    await store.recordAttempt(delivery.id, attemptRecord, `retry: ${error}`, false, new Date(now + backoff).toISOString());
    return false;
  }

  #request(delivery: Due, timestamp: number): { body: string; headers: Record<string, string> } {
    const { subscription } = delivery;
    if (subscription.format === 'slack') return { body: JSON.stringify({ text: slackText(delivery) }), headers: { 'content-type': 'application/json' } };
    const body = JSON.stringify(eventPayload(delivery));
    const id = `msg_${subscription.id}_${delivery.id}`;
    const secret = this.#deps.secretBox.decrypt(subscription.secret_enc);
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': standardSignature(secret, id, timestamp, body),
      },
    };
  }
}
