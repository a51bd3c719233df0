import type { Context, Hono } from 'hono';
import { matchedRoutes } from 'hono/route';

/**
 * How a route's caller proves who it is: every route declares one, and the declaration is the only
 * place it is decided. `api-key` is checked by the one auth middleware in app.ts before the handler
 * runs; the other kinds carry their credential where only the route can read it (a signed body, a
 * one-use state, a token naming the route's own listener), so the route checks it, and the
 * declaration says which it is.
 */
export const ROUTE_AUTH_KINDS = [
  /** `X-Api-Key` or `Authorization: Bearer`, with `X-Tenant-Id`: checked before the handler. */
  'api-key',
  /** Nothing to prove: health, the OpenAPI document, the page that starts creating the GitHub App. */
  'none',
  /** A listener agent's token, for its own listener only (routes/agent.ts). */
  'listener-token',
  /** GitHub's `X-Hub-Signature-256` over the body, with the endpoint's secret (routes/webhooks.ts). */
  'webhook-signature',
  /** The signature of a short-lived upload URL (routes/uploads.ts). */
  'signed-url',
  /** The one-use `state` of an OAuth flow the server started (routes/oauth-callback.ts). */
  'oauth-state',
  /** The one-use `state` of GitHub's redirect back after an installation or the App's creation. */
  'github-state',
  /** An API key typed into an HTML form and posted in its body (the GitHub App's pages). */
  'form-api-key',
  /** A GitHub Actions OIDC ID token, exchanged for a short-lived key (routes/github-actions-token.ts). */
  'actions-id-token',
  /** The console's session cookie (server/console/). */
  'console-session',
] as const;

export type RouteAuth = (typeof ROUTE_AUTH_KINDS)[number];

// Keyed by the handler Hono calls: the auth middleware finds it among the request's matched routes.
const declared = new WeakMap<object, RouteAuth>();

/** Records `handler`'s auth; a handler registered without one is refused (a programming error). */
export function declareAuth(handler: object, auth: RouteAuth | undefined, where: string): void {
  if (!auth || !ROUTE_AUTH_KINDS.includes(auth)) throw new Error(`${where} declares no auth (one of ${ROUTE_AUTH_KINDS.join(', ')})`);
  declared.set(handler, auth);
}

/** The auth `handler` was declared with, or undefined for middleware and anything registered without a declaration. */
export function declaredAuthOf(handler: object): RouteAuth | undefined {
  return declared.get(handler);
}

/**
 * The auth of the route that answers this request: the first matched handler with a declaration
 * (middleware has none). A path no route answers takes a key under /v1 and /v2, so without one an
 * unknown path answers 401 as a known one does, and paths cannot be probed; elsewhere it takes none.
 */
export function requestAuth(c: Context): RouteAuth {
  for (const { handler } of matchedRoutes(c)) {
    const auth = declared.get(handler);
    if (auth) return auth;
  }
  const path = c.req.path;
  return (path.startsWith('/v1') || path.startsWith('/v2')) && (path.length === 3 || path[3] === '/') ? 'api-key' : 'none';
}

/**
 * Mounts a sub-app (the console) under `prefix`, every route of it with `auth`: its own middleware
 * checks that credential (the session cookie), and the declaration says so.
 */
export function mountWithAuth(app: Hono<any>, prefix: string, sub: Hono<any>, auth: RouteAuth): void {
  const before = app.routes.length;
  app.route(prefix, sub);
  for (const added of app.routes.slice(before)) declareAuth(added.handler, auth, `${added.method} ${added.path}`);
}
