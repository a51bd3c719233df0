import { generateKeyPairSync } from 'node:crypto';
import { Hono } from 'hono';
import { afterEach, describe, expect, expectTypeOf, it, vi } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import type { consoleFeature } from '../../server/console/console.ts';
import { type ControlPlane, createControlPlane } from '../../server/control-plane.ts';
import type { auditEventsFeature } from '../../server/features/audit-events.ts';
import type { deploymentsFeature } from '../../server/features/deployments.ts';
import type { eventSubscriptionsFeature } from '../../server/features/event-subscriptions.ts';
import type { githubAppFeature } from '../../server/features/github-app.ts';
import type { keylessCiFeature } from '../../server/features/keyless-ci.ts';
import type { listenerAgentPlane, listenerAgentsFeature } from '../../server/features/listener-agents.ts';
import type { oauthFeature } from '../../server/features/oauth.ts';
import type { webhooksFeature } from '../../server/features/webhooks.ts';
import type { AppEnv, RouteContext } from '../../server/http/env.ts';
import { OpenApiRegistry } from '../../server/http/openapi.ts';
import { systemClock } from '../../server/lib/clock.ts';
import { silentLogger } from '../../server/logger.ts';
import type { Services } from '../../server/services.ts';
import type { StoreBackend } from '../../server/store/backend.ts';
import type { Store } from '../../server/store/types.ts';
import { openTestBackend, testBackendKind } from '../helpers/backends.ts';

/** `METHOD path` of each route an app answers with, without the app's own global middleware (`app.use('*')`). */
function routesOf(app: Hono<AppEnv>): string[] {
  return app.routes.filter((r) => !(r.method === 'ALL' && (r.path === '*' || r.path === '/*'))).map((r) => `${r.method} ${r.path}`);
}

function appSettings(): Record<string, string> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { GITHUB_APP_ID: '1', GITHUB_APP_PRIVATE_KEY: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), GITHUB_APP_SLUG: 'cp-test' };
}

describe('the control plane is the composition of its features', () => {
  const opened: StoreBackend[] = [];
  afterEach(async () => {
    for (const backend of opened.splice(0)) await backend.close();
  });

  async function controlPlane(env: Record<string, string> = {}): Promise<ControlPlane> {
    const backend = await openTestBackend(testBackendKind());
    opened.push(backend);
    return createControlPlane({
      backend,
      clock: systemClock,
      log: silentLogger,
      config: loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: ':memory:', ...env }),
      secretBox: backend.secretBox,
      publicUrl: () => 'http://localhost',
    });
  }

  it("every route of the app is one feature's, registered once, in the features' order", async () => {
    const cp = await controlPlane(appSettings());
    const names = cp.features.map((f) => f.name);
    expect(names).toEqual([
      'deployments',
      'audit-events',
      'github-app',
      'webhooks',
      'oauth',
      'event-subscriptions',
      'listener-agents',
      'keyless-ci',
      'console',
    ]);
    // Each feature's routes alone, on an app of their own: together, in order, they are the whole app's.
    const perFeature = cp.features.map((feature) => {
      const ctx: RouteContext = { app: new Hono<AppEnv>(), services: cp.services, docs: new OpenApiRegistry({}) };
      feature.routes(ctx);
      return routesOf(ctx.app);
    });
    for (const [i, routes] of perFeature.entries()) expect(routes.length, names[i]).toBeGreaterThan(0);
    expect(routesOf(cp.app)).toEqual(perFeature.flat());
    // No two features answer the same method and path.
    const owners = new Map<string, string>();
    for (const [i, routes] of perFeature.entries()) {
      for (const route of new Set(routes)) {
        expect(owners.get(route), `${route}: ${owners.get(route)} and ${names[i]}`).toBeUndefined();
        owners.set(route, names[i]!);
      }
    }
  });

  it('start resumes the pipeline, then starts every worker once; stop stops each once, then the pipeline', async () => {
    const cp = await controlPlane(appSettings());
    const calls: string[] = [];
    const resume = cp.services.pipeline.resume.bind(cp.services.pipeline);
    vi.spyOn(cp.services.pipeline, 'resume').mockImplementation(() => {
      calls.push('pipeline.resume');
      return resume();
    });
    const stopPipeline = cp.services.pipeline.stop.bind(cp.services.pipeline);
    vi.spyOn(cp.services.pipeline, 'stop').mockImplementation(() => {
      calls.push('pipeline.stop');
      stopPipeline();
    });
    const workers = cp.features.flatMap((feature) => feature.workers.map((worker, i) => ({ worker, label: `${feature.name}#${i}` })));
    for (const { worker, label } of workers) {
      const start = worker.start.bind(worker);
      const stop = worker.stop.bind(worker);
      vi.spyOn(worker, 'start').mockImplementation(() => {
        calls.push(`start ${label}`);
        return start();
      });
      vi.spyOn(worker, 'stop').mockImplementation(() => {
        calls.push(`stop ${label}`);
        stop();
      });
    }
    // With App settings: the uploads and their sweep, audit retention, the status sender, the delivery
    // worker, reconciler and preview sweep, OAuth's flow watch, the event sender, the agent plane, the console's two.
    expect(workers.map((w) => w.label)).toEqual([
      'deployments#0',
      'deployments#1',
      'audit-events#0',
      'github-app#0',
      'webhooks#0',
      'webhooks#1',
      'webhooks#2',
      'oauth#0',
      'event-subscriptions#0',
      'listener-agents#0',
      'console#0',
      'console#1',
    ]);

    await cp.start();
    cp.stop();
    expect(calls).toEqual(['pipeline.resume', ...workers.map((w) => `start ${w.label}`), ...workers.map((w) => `stop ${w.label}`), 'pipeline.stop']);
  });

  it('without GitHub App settings, the App side is not built: no setup route, no status sender, no preview sweep', async () => {
    const cp = await controlPlane();
    const github = cp.features.find((f) => f.name === 'github-app')!;
    const webhooks = cp.features.find((f) => f.name === 'webhooks')!;
    expect(github.workers).toEqual([]);
    expect(webhooks.workers).toHaveLength(2);
    expect(routesOf(cp.app)).not.toContain('GET /v1/integrations/github/setup');
    // The manifest flow that makes the App's settings is there all the same.
    expect(routesOf(cp.app)).toContain('GET /console/github/new-app');
  });
});

/** True when `T` has every member of the Store: whoever holds it can call anything in the core tables. */
type IsWholeStore<T> = [Exclude<keyof Store, keyof NonNullable<T>>] extends [never] ? true : false;
/** The dependencies of `D` that are the whole Store, or carry it one level down (as `Services` does, in `store`). */
type WholeStoreDeps<D> = {
  [K in keyof D]-?: IsWholeStore<D[K]> extends true
    ? K
    : true extends { [M in keyof NonNullable<D[K]>]-?: IsWholeStore<NonNullable<D[K]>[M]> }[keyof NonNullable<D[K]>]
      ? K
      : never;
}[keyof D];
type DepsOf<F> = F extends (deps: infer D) => unknown ? D : never;

describe('no feature receives the whole Store (checked by the typecheck over this file)', () => {
  it("each feature factory's dependencies are store slices", () => {
    expectTypeOf<WholeStoreDeps<DepsOf<typeof deploymentsFeature>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof auditEventsFeature>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof githubAppFeature>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof webhooksFeature>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof oauthFeature>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof eventSubscriptionsFeature>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof listenerAgentPlane>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof listenerAgentsFeature>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof keylessCiFeature>>>().toBeNever();
    expectTypeOf<WholeStoreDeps<DepsOf<typeof consoleFeature>>>().toBeNever();
  });

  it('the check finds the whole Store, directly or inside the services (the check itself works)', () => {
    expectTypeOf<WholeStoreDeps<{ store: Store; clock: object }>>().toEqualTypeOf<'store'>();
    expectTypeOf<WholeStoreDeps<{ services: Services }>>().toEqualTypeOf<'services'>();
    expectTypeOf<WholeStoreDeps<{ store?: Pick<Store, 'getWorkspace'> }>>().toBeNever();
  });
});
