import type { SecretBox } from '../../crypto/secret-box.ts';
import type { Logger } from '../../logger.ts';
import type { OAuthStore } from '../../store/oauth.ts';
import type { Clock } from '../clock.ts';
import { OAuthFlows } from './flows.ts';
import { OAuthProviders } from './providers.ts';
import { OAuthTokens } from './tokens.ts';

export type OAuthDeps = { store: OAuthStore; secretBox: SecretBox; clock: Clock; log: Logger; publicUrl: () => string };
export type OAuth = ReturnType<typeof createOAuth>;

/** Wires the OAuth helper: providers, stored tokens, and the flows that obtain them. */
export function createOAuth(deps: OAuthDeps) {
  const providers = new OAuthProviders(deps);
  const tokens = new OAuthTokens({ ...deps, providers });
  const flows = new OAuthFlows({ ...deps, providers, tokens });
  return { providers, tokens, flows };
}
