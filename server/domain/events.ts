import { randomBytes } from 'node:crypto';
import type { EventSubscription, EventSubscriptionCreate } from '../../shared/schemas/event-subscription.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import type { Clock } from '../lib/clock.ts';
import { auditSubject } from '../lib/request-scope.ts';
import type { EventDelivery, EventStore, EventSubscriptionRecord } from '../store/events.ts';
import { NotFound, ValidationFailed } from './errors.ts';
import type { OutboundPolicy } from './oauth/outbound.ts';

/** Deliveries shown per subscription, newest first. */
const DELIVERIES_SHOWN = 100;

function view(record: EventSubscriptionRecord): EventSubscription {
  const { secret_enc: _secret, ...rest } = record;
  return rest;
}

/**
 * A workspace's subscriptions to outgoing events (contract §17). The `whsec_` secret is made here,
 * shown once, and kept encrypted with the deployment secrets' key. The receiver's address follows
 * the outbound rule of OAuth providers (no loopback, private, link-local or metadata address unless
 * the operator allows the host in `EVENTS_ALLOWED_HOSTS`), checked here and again at each send.
 */
export class EventSubscriptions {
  readonly #store: EventStore;
  readonly #box: SecretBox;
  readonly #clock: Clock;
  readonly #policy: OutboundPolicy;

  constructor(deps: { store: EventStore; secretBox: SecretBox; clock: Clock; policy: OutboundPolicy }) {
    this.#store = deps.store;
    this.#box = deps.secretBox;
    this.#clock = deps.clock;
    this.#policy = deps.policy;
  }

  async create(tenantId: string, input: EventSubscriptionCreate): Promise<EventSubscription & { secret: string }> {
    const refusal = await this.#policy.refusal(input.url);
    if (refusal) throw new ValidationFailed([{ loc: ['body', 'url'], msg: refusal, type: 'value_error' }]);
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    const record: EventSubscriptionRecord = {
      id: crypto.randomUUID(),
      tenant_id: tenantId,
      url: input.url,
      events: [...new Set(input.events)],
      format: input.format,
      secret_enc: this.#box.encrypt(secret),
      created_at: this.#clock.now(),
    };
    // Named before the write: the audit entry rides the write's own transaction.
    auditSubject(record.id);
    await this.#store.create(record);
    return { ...view(record), secret };
  }

  async list(tenantId: string): Promise<EventSubscription[]> {
    return (await this.#store.list(tenantId)).map(view);
  }

  async delete(tenantId: string, id: string): Promise<void> {
    if (!(await this.#store.remove(tenantId, id))) throw new NotFound('Event subscription not found');
  }

  async deliveries(tenantId: string, id: string) {
    if (!(await this.#store.get(tenantId, id))) throw new NotFound('Event subscription not found');
    return (await this.#store.deliveries(id, DELIVERIES_SHOWN)).map((d) => ({
      id: d.id,
      event: d.event,
      deployment_id: d.deployment_id,
      revision_id: d.revision_id,
      status: d.status,
      state: deliveryState(d),
      outcome: d.outcome,
      created_at: d.created_at,
      attempts: d.attempts_made,
    }));
  }
}

function deliveryState(d: EventDelivery): 'pending' | 'delivered' | 'failed' {
  if (d.done_at === null) return 'pending';
  return d.outcome === 'delivered' ? 'delivered' : 'failed';
}
