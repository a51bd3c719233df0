import { randomFillSync } from 'node:crypto';
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
  return header !== undefined && ACCEPTED_ID.test(header) ? header : newRequestId();
}

/** Random bytes for this many ids are drawn, and their text written, at once. */
const IDS_PER_DRAW = 256;
const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');
const randomPool = Buffer.allocUnsafe(16 * IDS_PER_DRAW);
const idsText = Buffer.allocUnsafe(36 * IDS_PER_DRAW);
/** The text of the last draw's ids, one after another; `nextId` is the first not handed out. */
let ids = '';
let nextId = IDS_PER_DRAW;

/**
 * A random (version 4) UUID, as `crypto.randomUUID()` makes one, from the same generator: the
 * bytes of 256 ids are drawn at once and their text written into one buffer, read out as one
 * string; each id is then a slice of it (V8 makes a slice of 13 characters or more a view of its
 * string: no copy, no call into C++). `crypto.randomUUID()` joins sixteen two-digit strings: about
 * 560 bytes of garbage per id; one string per id read out of a buffer was ~60 bytes and a call
 * into C++ each (0.4% of the server's CPU per GET revision in a `perf` profile,
 * docs/decisions/hot-paths-round-6.md).
 */
export function newRequestId(): string {
  if (nextId === IDS_PER_DRAW) {
    ids = drawIds();
    nextId = 0;
  }
  const at = nextId * 36;
  nextId += 1;
  return ids.slice(at, at + 36);
}

/** The text of `IDS_PER_DRAW` new ids, one after another. */
function drawIds(): string {
  randomFillSync(randomPool);
  let at = 0;
  for (let from = 0; from < randomPool.length; from += 16) {
    for (let i = 0; i < 16; i += 1) {
      let byte = randomPool[from + i]!;
      if (i === 6)
        byte = (byte & 0x0f) | 0x40; // version 4
      else if (i === 8) byte = (byte & 0x3f) | 0x80; // the RFC 9562 variant
      if (i === 4 || i === 6 || i === 8 || i === 10) idsText[at++] = 0x2d; // '-'
      idsText[at++] = HEX_DIGITS[byte >> 4]!;
      idsText[at++] = HEX_DIGITS[byte & 0x0f]!;
    }
  }
  return idsText.toString('latin1');
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
