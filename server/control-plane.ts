import type { Hono } from 'hono';
import { createApp, type PublicPath } from './app.ts';
import type { Config } from './config.ts';
import { createGithubWebhooks } from './github-webhooks.ts';
import type { SecretBox } from './crypto/secret-box.ts';
import type { Clock } from './domain/clock.ts';
import { createOAuth } from './domain/oauth/oauth.ts';
import type { AppEnv, RouteContext } from './http/env.ts';
import type { Logger } from './logger.ts';
import { OAUTH_CALLBACK_PATH, oauthRoutes } from './routes/oauth.ts';
import { createServices, type Services } from './services.ts';
import { SqliteOAuthStore } from './store/oauth.ts';
import type { SqliteStore } from './store/sqlite.ts';

export type ControlPlaneDeps = {
  store: SqliteStore;
  clock: Clock;
  log: Logger;
  config: Config;
  /** Encrypts values kept at rest (secrets, client secrets, tokens). */
  secretBox: SecretBox;
  /** The address the outside world reaches this server at (known once it listens). */
  publicUrl: () => string;
};

export type ControlPlane = {
  services: Services;
  app: Hono<AppEnv>;
  /** Resumes the pipeline and starts background workers. */
  start(): Promise<void>;
  /** Stops timers and workers; the database keeps what they were doing. */
  stop(): void;
};

/**
 * Everything the server runs, wired from its dependencies: services, HTTP routes, background
 * work. The real server and the in-process test app both come from here, so a feature is wired
 * once. Features beyond the core API add their routes, public paths and workers below.
 */
export function createControlPlane(deps: ControlPlaneDeps): ControlPlane {
  const services = createServices({ store: deps.store, clock: deps.clock, log: deps.log, config: deps.config });
  const extraRoutes: Array<(ctx: RouteContext) => void> = [];
  const publicPaths: PublicPath[] = [];
  const workers: Array<{ start(): Promise<void> | void; stop(): void }> = [];

  // GitHub push webhooks (issue 3): signature-checked intake, delivery worker, branch-head reconciler.
  const github = createGithubWebhooks({ services, db: deps.store.db, config: deps.config });
  extraRoutes.push(github.routes);
  publicPaths.push(github.isPublic);
  workers.push(github.worker, github.reconciler);

  // OAuth helper (issue 5): providers, authenticate, wait; the callback is checked by its state, not a key.
  const oauth = createOAuth({ store: new SqliteOAuthStore(deps.store.db), secretBox: deps.secretBox, clock: deps.clock, log: deps.log, publicUrl: deps.publicUrl });
  extraRoutes.push((ctx) => oauthRoutes(ctx, oauth));
  publicPaths.push((path) => path === OAUTH_CALLBACK_PATH);

  const app = createApp(services, { extraRoutes, publicPaths, inflightBodyBytes: deps.config.WEBHOOK_INFLIGHT_BYTES });
  return {
    services,
    app,
    async start() {
      await services.pipeline.resume();
      for (const worker of workers) await worker.start();
    },
    stop() {
      for (const worker of workers) worker.stop();
      services.pipeline.stop();
    },
  };
}
