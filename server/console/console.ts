import type { Config } from '../config.ts';
import type { AuditLog } from '../domain/audit.ts';
import type { Auth } from '../domain/auth.ts';
import type { GithubTrustEntries } from '../domain/github-oidc/trust-entries.ts';
import type { RouteContext } from '../http/env.ts';
import { mountWithAuth } from '../http/route-auth.ts';
import type { Clock } from '../lib/clock.ts';
import { sweepLoop } from '../lib/poll-loop.ts';
import type { Logger } from '../logger.ts';
import type { Services } from '../services.ts';
import type { ConsoleStore } from '../store/console.ts';
import { browserLinks } from './browser-links.ts';
import { LiveHub } from './live.ts';
import { consoleRoutes } from './routes.ts';
import { ConsoleSessions } from './sessions.ts';

/** What the console's routes are built from. */
export type ConsoleDeps = {
  services: Services;
  sessions: ConsoleSessions;
  hub: LiveHub;
  trust: GithubTrustEntries;
  githubWebUrl: string;
  /** A listener whose agent was heard from within this long is shown healthy. */
  listenerHealthyWithinMs: number;
  /** Whether the session cookie is marked `Secure`: when the server is reached over https. */
  secureCookies: (requestUrl: string) => boolean;
};

/**
 * The web console (contract section 16), one feature (the shape of `features/feature.ts`, which the
 * composition checks; this folder stays below `features/`): its routes under `/console` (built from the
 * services every route is handed), the browser redirects into it, its store slice (sessions, live
 * fingerprints) and its workers (the live pages' ticker, the sweep of ended sessions).
 */
export function consoleFeature(deps: {
  auth: Auth;
  audit: Pick<AuditLog, 'recordSignIn'>;
  clock: Clock;
  store: ConsoleStore;
  trust: GithubTrustEntries;
  log: Logger;
  config: Pick<Config, 'CONSOLE_SESSION_SECONDS' | 'CONSOLE_LIVE_INTERVAL_MS' | 'AGENT_LEASE_MS' | 'GITHUB_URL'>;
  publicUrl: () => string;
}) {
  const { config } = deps;
  const sessions = new ConsoleSessions({
    auth: deps.auth,
    store: deps.store,
    clock: deps.clock,
    ttlSeconds: config.CONSOLE_SESSION_SECONDS,
    audit: deps.audit,
  });
  const hub = new LiveHub({ store: deps.store, log: deps.log, tickMs: config.CONSOLE_LIVE_INTERVAL_MS });
  // Ended sessions are removed hourly.
  const sessionSweep = sweepLoop({
    sweep: () => sessions.sweep(),
    everyMs: 3_600_000,
    onError: (error) => deps.log.warn('console: could not remove ended sessions', { error: String(error) }),
  });
  return {
    name: 'console' as const,
    beforeAuth: [browserLinks],
    routes(ctx: RouteContext) {
      const app = consoleRoutes({
        services: ctx.services,
        sessions,
        hub,
        trust: deps.trust,
        githubWebUrl: config.GITHUB_URL,
        listenerHealthyWithinMs: config.AGENT_LEASE_MS,
        // Behind a TLS-terminating proxy the request itself is http: the public URL says how browsers come.
        secureCookies: (requestUrl) => requestUrl.startsWith('https:') || deps.publicUrl().startsWith('https:'),
      });
      // Every console page takes the session cookie, checked by the console's own middleware.
      mountWithAuth(ctx.app, '/console', app, 'console-session');
    },
    workers: [hub, sessionSweep],
  };
}
