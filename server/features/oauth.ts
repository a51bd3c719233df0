import type { Config } from '../config.ts';
import type { SecretBox } from '../crypto/secret-box.ts';
import { createOAuth } from '../domain/oauth/oauth.ts';
import type { Resolve } from '../domain/oauth/outbound.ts';
import { SharedWatch } from '../domain/shared-watch.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import { oauthRoutes } from '../routes/oauth.ts';
import { type Coordination, TOPICS } from '../store/coordination.ts';
import type { OAuthStore } from '../store/oauth.ts';
import { type Feature, stopOnly } from './feature.ts';

/**
 * The OAuth helper (contract §8): providers, authenticate, wait; the callback is checked by its
 * state, not a key. A flow's wait is woken in whichever process holds it (the shared watch).
 */
export function oauthFeature(deps: {
  store: OAuthStore;
  coordination: Coordination;
  secretBox: SecretBox;
  clock: Clock;
  log: Logger;
  publicUrl: () => string;
  config: Pick<Config, 'OAUTH_ALLOWED_HOSTS'>;
  /** Name resolution for provider hosts (tests inject a hostile resolver); the system's by default. */
  resolve?: Resolve;
}): Feature {
  const { coordination } = deps;
  const flowWatch = new SharedWatch(coordination, TOPICS.oauthFlow);
  const oauth = createOAuth({
    store: deps.store,
    secretBox: deps.secretBox,
    clock: deps.clock,
    log: deps.log,
    publicUrl: deps.publicUrl,
    allowedHosts: deps.config.OAUTH_ALLOWED_HOSTS,
    resolve: deps.resolve,
    watch: flowWatch,
    exclusive: (name, work) => coordination.exclusive(name, work),
  });
  return { name: 'oauth', routes: (ctx) => oauthRoutes(ctx, oauth), workers: [stopOnly(() => flowWatch.detach())] };
}
