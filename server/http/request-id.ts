import type { Context, MiddlewareHandler } from 'hono';
import { runInRequestScope } from '../lib/request-scope.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from '../metrics.ts';
import type { Tracing } from '../tracing.ts';
import { REQUEST_ID_HEADER, requestHeader, setAnswerHeader } from './node-request.ts';

/** A caller's id is kept when it is a plain token (a proxy's or a client's); anything else is replaced. */
const ACCEPTED_ID = /^[A-Za-z0-9._:+/=-]{1,128}$/;
/** The `route` label of a request no route matched (its path is never a label). */
const UNMATCHED = '(unmatched)';

/** The request's id: the caller's `X-Request-Id` when it is a plain token, a new UUID otherwise. */
export function requestIdFor(header: string | undefined): string {
  return header !== undefined && ACCEPTED_ID.test(header) ? header : crypto.randomUUID();
}

/** The template of the route that serves the request (`/v2/deployments/:deployment_id`), never its path. */
export function routeTemplate(c: Context): string | undefined {
  return c.req.matchedRoutes.findLast((matched) => matched.method !== 'ALL')?.path;
}

/**
 * Gives every request its id and runs it inside its request scope, so every log line written
 * while serving it (whatever awaits lie between) carries the id, and the answer returns it; then
 * counts the answer by route template and status, and logs it at `debug`.
 */
export function observeRequests(metrics: Pick<Metrics, 'httpAnswered'>, log: Logger, tracer?: Tracing): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    const callerTrace = requestHeader(c, 'traceparent');
    const span = tracer?.startRequest(c.req.method, callerTrace);
    const requestId = requestIdFor(requestHeader(c, REQUEST_ID_HEADER));
    setAnswerHeader(c, REQUEST_ID_HEADER, requestId);
    await runInRequestScope({ requestId, traceparent: span?.traceparent ?? callerTrace }, async () => {
      await next();
      const seconds = (performance.now() - started) / 1000;
      const route = routeTemplate(c) ?? UNMATCHED;
      const status = c.res.status;
      metrics.httpAnswered(c.req.method, route, status, seconds);
      span?.end(route, status);
      log.debug('request answered', { method: c.req.method, route, status, duration_ms: Math.round(seconds * 1e4) / 10 });
    });
  };
}
