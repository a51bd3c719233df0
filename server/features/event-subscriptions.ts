import type { Config } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { EventSender } from '../domain/event-sender.ts';
import { EventSubscriptions } from '../domain/events.ts';
import { OutboundPolicy, type Resolve } from '../domain/oauth/outbound.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import { eventSubscriptionRoutes } from '../routes/event-subscriptions.ts';
import type { EventStore } from '../store/events.ts';
import type { Feature } from './feature.ts';

/** Outgoing events (contract §17): workspaces' subscriptions, and the sender of the outbox the triggers fill. */
export function eventSubscriptionsFeature(deps: {
  store: EventStore;
  secretBox: SecretBox;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'EVENTS_ALLOWED_HOSTS'>;
  resolve?: Resolve;
  /** Whether this process sends the outbox now (one process at a time on one database). */
  lead: () => Promise<boolean>;
}): Feature {
  const policy = new OutboundPolicy({ allowedHosts: deps.config.EVENTS_ALLOWED_HOSTS, resolve: deps.resolve, setting: 'EVENTS_ALLOWED_HOSTS' });
  const subscriptions = new EventSubscriptions({ store: deps.store, secretBox: deps.secretBox, clock: deps.clock, policy });
  const sender = new EventSender({ store: deps.store, secretBox: deps.secretBox, policy, clock: deps.clock, log: deps.log, lead: deps.lead });
  return { name: 'event-subscriptions', routes: (ctx) => eventSubscriptionRoutes(ctx, subscriptions), workers: [sender] };
}
