import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { TrieRouter } from 'hono/router/trie-router';
import { NotFound, ValidationFailed } from './domain/errors.ts';
import type { Feature } from './features/feature.ts';
import { auditTrail } from './http/audit-trail.ts';
import type { AppEnv, RouteContext } from './http/env.ts';
import { errorResponse } from './http/errors.ts';
import { apiKeyFrom, clientAddress, requestHeader } from './http/node-request.ts';
import { OpenApiRegistry } from './http/openapi.ts';
import { observeRequests } from './http/request-id.ts';
import { requestAuth } from './http/route-auth.ts';
import { urlNulProblem } from './http/validation.ts';
import { ByteBudget } from './lib/byte-budget.ts';
import type { Services } from './services.ts';
import type { Tracing } from './tracing.ts';

/**
 * The HTTP shell: one request observer, the features' middleware that answers before the key
 * check, one auth middleware (reading each route's declared auth), the audit trail, one error
 * mapping; then each feature's routes, in the order of `features`.
 */
export function createApp(
  services: Services,
  options: {
    features: readonly Feature[];
    publicUrl?: () => string;
    inflightBodyBytes?: number;
    tracer?: Tracing;
    /**
     * What gives each request its id and scope, counts it and traces it: `observeRequests` by
     * default. Only bench/observability-cost.ts gives another (the same app without that layer).
     */
    observeRequests?: MiddlewareHandler<AppEnv>;
  },
) {
  // Hono's default (SmartRouter) would, at the first request, build a RegExpRouter over every route,
  // give up on one of this app's paths (it names /v1/integrations/github/:integration_id/repos) and
  // use its TrieRouter for good: the TrieRouter from the start matches the same, without the failed
  // build (docs/decisions/server-start.md).
  const app = new Hono<AppEnv>({ router: new TrieRouter() });
  const docs = new OpenApiRegistry({ serverUrl: options.publicUrl });
  const ctx: RouteContext = { app, services, docs };

  app.onError((error, c) => errorResponse(error, c, services));
  app.notFound((c) => errorResponse(new NotFound(`No route for ${c.req.method} ${c.req.path}.`), c, services));

  // Bodies read before they can be authenticated (webhook deliveries) share one memory budget; a
  // request's share goes back when it ends, whether it succeeded, failed or the client went away.
  const bodyBudget = new ByteBudget(options.inflightBodyBytes ?? Number.MAX_SAFE_INTEGER);
  // One middleware for both (one layer fewer per request than two): the key check, then the lease.
  const authenticate: MiddlewareHandler<AppEnv> = async (c, next) => {
    // The matched route's own declaration says whether it takes a key (http/route-auth.ts).
    if (requestAuth(c) === 'api-key') c.set('principal', await services.auth.authenticate(apiKeyOf(c), requestHeader(c, 'x-tenant-id'), clientAddress(c)));
    // Path parameters and query values reach lookups on every route: one NUL rule for all of them.
    const nul = urlNulProblem(c.req.url);
    if (nul) throw new ValidationFailed([nul]);
    // A GET or HEAD has no body to read (the server reads none of theirs): no lease to hand out.
    const method = c.req.method;
    if (method === 'GET' || method === 'HEAD') return next();
    const lease = bodyBudget.lease();
    c.set('bodyBudget', lease);
    try {
      await next();
    } finally {
      lease.release();
    }
  };
  app.use('*', options.observeRequests ?? observeRequests(services.metrics, services.log, options.tracer));
  for (const feature of options.features) for (const handler of feature.beforeAuth ?? []) app.use('*', handler);
  app.use('*', authenticate);
  app.use('*', auditTrail(services.audit, services.log));

  for (const feature of options.features) feature.routes(ctx);
  return app;
}

function apiKeyOf(c: Context<AppEnv>): string | undefined {
  return apiKeyFrom(c, requestHeader);
}
