import type { Config } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { EventSender } from '../domain/event-sender.ts';
import { EventSubscriptions } from '../domain/events.ts';
import { OutboundPolicy, type Resolve } from '../domain/oauth/outbound.ts';
import type { RouteContext } from '../http/env.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import { eventSubscriptionRoutes } from '../routes/event-subscriptions.ts';
import type { EventStore } from '../store/events.ts';

/** Outgoing events (contract §17): the subscription routes and the outbox's sender. */
export function createOutgoingEvents(deps: {
  store: EventStore;
  secretBox: SecretBox;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'EVENTS_ALLOWED_HOSTS'>;
  resolve?: Resolve;
  lead: () => Promise<boolean>;
}) {
  const policy = new OutboundPolicy({ allowedHosts: deps.config.EVENTS_ALLOWED_HOSTS, resolve: deps.resolve, setting: 'EVENTS_ALLOWED_HOSTS' });
  const subscriptions = new EventSubscriptions({ store: deps.store, secretBox: deps.secretBox, clock: deps.clock, policy });
  const sender = new EventSender({ store: deps.store, secretBox: deps.secretBox, policy, clock: deps.clock, log: deps.log, lead: deps.lead });
  return { sender, routes: (ctx: RouteContext) => eventSubscriptionRoutes(ctx, subscriptions) };
}
