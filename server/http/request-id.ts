import type { Context, MiddlewareHandler } from 'hono';
import { runInRequestScope } from '../lib/request-scope.ts';
import { requestHeader } from './node-request.ts';

export const REQUEST_ID_HEADER = 'x-request-id';

/** A caller's id is kept when it is a plain token (a proxy's or a client's); anything else is replaced. */
const ACCEPTED_ID = /^[A-Za-z0-9._:+/=-]{1,128}$/;

/** The request's id: the caller's `X-Request-Id` when it is a plain token, a new UUID otherwise. */
export function requestIdFor(header: string | undefined): string {
  return header !== undefined && ACCEPTED_ID.test(header) ? header : crypto.randomUUID();
}

/**
 * Gives every request its id and runs it inside its request scope, so every log line written
 * while serving it (whatever awaits lie between) carries the id, and the answer returns it.
 */
export const requestScope: MiddlewareHandler = async (c: Context, next) => {
  const requestId = requestIdFor(requestHeader(c, REQUEST_ID_HEADER));
  await runInRequestScope({ requestId }, next);
  c.res.headers.set(REQUEST_ID_HEADER, requestId);
};
