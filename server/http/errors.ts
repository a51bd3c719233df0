import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import {
  BadRequest,
  Conflict,
  DomainError,
  Forbidden,
  NotFound,
  PayloadTooLarge,
  Unauthorized,
  Unavailable,
  UnsupportedMediaType,
  ValidationFailed,
} from '../domain/errors.ts';
import type { Logger } from '../logger.ts';

/** The one place that turns an error into the contract's status code and body. */
export function errorResponse(error: unknown, c: Context, log: Logger): Response {
  if (error instanceof ValidationFailed) return c.json({ detail: error.issues }, 422);
  if (error instanceof DomainError) return c.json({ detail: error.message }, statusOf(error));
  const requestId = crypto.randomUUID();
  log.error('unhandled error', {
    request_id: requestId,
    method: c.req.method,
    path: c.req.path,
    error: error instanceof Error ? error.stack ?? error.message : String(error),
  });
  return c.json({ detail: 'Internal server error', request_id: requestId }, 500);
}

function statusOf(error: DomainError): ContentfulStatusCode {
  if (error instanceof NotFound) return 404;
  if (error instanceof Conflict) return 409;
  if (error instanceof BadRequest) return 400;
  if (error instanceof Unauthorized) return 401;
  if (error instanceof Forbidden) return 403;
  if (error instanceof PayloadTooLarge) return 413;
  if (error instanceof UnsupportedMediaType) return 415;
  if (error instanceof Unavailable) return 503;
  return 400;
}
