import type { SecretBox } from '../../crypto/secret-box.ts';
import type { Clock } from '../../lib/clock.ts';
import type { RevisionWatch } from '../../lib/revision-watch.ts';
import type { Logger } from '../../logger.ts';
import type { OAuthStore } from '../../store/oauth.ts';
import { OAuthFlows } from './flows.ts';
import { OutboundPolicy, type Resolve } from './outbound.ts';
import { OAuthProviders } from './providers.ts';
import { OAuthTokens } from './tokens.ts';

export type OAuthDeps = {
  store: OAuthStore;
  secretBox: SecretBox;
  clock: Clock;
  log: Logger;
  publicUrl: () => string;
  /** `OAUTH_ALLOWED_HOSTS`: provider hosts allowed even on internal addresses. */
  allowedHosts: string;
  /** Name resolution for provider hosts; the system's unless a test plays a hostile resolver. */
  resolve?: Resolve;
  /** Wakes `wait` when a flow ends, keyed by flow id; the control plane gives one shared with the other processes. */
  watch?: RevisionWatch;
  /** Runs work while no other process runs work of the same name (one token refresh at a time across processes). */
  exclusive?: <T>(name: string, work: () => Promise<T>) => Promise<T>;
};
export type OAuth = ReturnType<typeof createOAuth>;

/** Wires the OAuth helper: providers, stored tokens, and the flows that obtain them. */
export function createOAuth(deps: OAuthDeps) {
  const policy = new OutboundPolicy({ allowedHosts: deps.allowedHosts, resolve: deps.resolve });
  const providers = new OAuthProviders({ ...deps, policy });
  const tokens = new OAuthTokens({ ...deps, providers, policy });
  const flows = new OAuthFlows({ ...deps, providers, tokens, policy });
  return { providers, tokens, flows };
}
