import type { Config } from '../config.ts';
import { GithubTokenExchanger } from '../domain/github-oidc/exchange.ts';
import { type IssuerFetch, IssuerKeys } from '../domain/github-oidc/issuer-keys.ts';
import { GithubTrustEntries } from '../domain/github-oidc/trust-entries.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import { githubActionsTokenRoutes } from '../routes/github-actions-token.ts';
import { githubTrustRoutes } from '../routes/github-trust.ts';
import type { GithubTrustStore } from '../store/github-trust.ts';
import type { Store } from '../store/types.ts';
import type { Feature } from './feature.ts';

/**
 * Keyless CI (contract section 13): workspaces trust GitHub repositories, and a workflow of one
 * exchanges its Actions OIDC ID token for a short-lived key instead of keeping an API key secret.
 * The issuer's keys are read when the first token comes, not at start.
 */
export function keylessCiFeature(deps: {
  store: Pick<Store, 'getWorkspace'>;
  trust: GithubTrustStore;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'GITHUB_OIDC_ISSUER' | 'GITHUB_OIDC_AUDIENCE'>;
  publicUrl: () => string;
  /** How the issuer is read (tests may count or refuse reads); the system's `fetch` by default. */
  issuerFetch?: IssuerFetch;
}): Feature & { entries: GithubTrustEntries } {
  const issuer = deps.config.GITHUB_OIDC_ISSUER;
  const keys = new IssuerKeys({ issuer, clock: deps.clock, log: deps.log, fetch: deps.issuerFetch });
  const exchanger = new GithubTokenExchanger({
    store: deps.store,
    trust: deps.trust,
    keys,
    clock: deps.clock,
    log: deps.log,
    issuer,
    audience: () => deps.config.GITHUB_OIDC_AUDIENCE ?? deps.publicUrl(),
  });
  const entries = new GithubTrustEntries({ store: deps.store, trust: deps.trust, clock: deps.clock });
  return {
    name: 'keyless-ci',
    /** The trust entries, which the console lists and edits too. */
    entries,
    routes(ctx) {
      githubTrustRoutes(ctx, entries);
      githubActionsTokenRoutes(ctx, exchanger);
    },
    workers: [],
  };
}
