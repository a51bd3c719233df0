import type { MiddlewareHandler } from 'hono';
import { apiKeyFrom, requestHeader } from '../http/node-request.ts';

/** `/v2/deployments/{id}` and `/v2/deployments/{id}/revisions/{id}` (`/logs` too): what our GitHub links point at. */
const API_PAGE = /^\/v2\/deployments\/([0-9a-f-]{36})(?:\/revisions\/([0-9a-f-]{36})(?:\/logs)?)?\/?$/i;
/** The "View status" link the hosted `langgraph deploy` CLI prints. */
const HOSTED_PAGE = /^\/o\/[^/]+\/host\/deployments\/([0-9a-f-]{36})\/?$/i;

/**
 * Sends a browser that opens one of our links to the console page about the same thing: `/`, the
 * hosted CLI's `/o/{org}/host/deployments/{id}`, and the API addresses our commit statuses link
 * to, when asked for HTML without a key (a script with a key, or asking for JSON, gets the API's
 * answer as before). Runs before the API's key check, which would answer those with a 401.
 */
export const browserLinks: MiddlewareHandler = async (c, next) => {
  // Node's parsed headers, not `c.req.header()`: this runs before every request, and building the
  // WHATWG Headers it reads would load undici (Node's fetch) at the first one (docs/decisions/server-start.md).
  if (c.req.method !== 'GET' || !(requestHeader(c, 'accept') ?? '').includes('text/html')) return next();
  const path = c.req.path;
  if (path === '/') return c.redirect('/console', 302);
  const hosted = HOSTED_PAGE.exec(path);
  if (hosted) return c.redirect(`/console/deployments/${hosted[1]!.toLowerCase()}`, 302);
  const api = API_PAGE.exec(path);
  if (api && !apiKeyFrom(c, requestHeader)) {
    const deployment = `/console/deployments/${api[1]!.toLowerCase()}`;
    return c.redirect(api[2] ? `${deployment}/revisions/${api[2].toLowerCase()}` : deployment, 302);
  }
  return next();
};
