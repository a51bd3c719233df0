import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { DomainError, type DomainErrorKind, TooManyRequests, Unavailable, ValidationFailed } from '../domain/errors.ts';
import type { Readiness } from '../domain/readiness.ts';
import { asStorageUnavailable } from '../domain/storage-unavailable.ts';
import { requestScope } from '../lib/request-scope.ts';
import type { Logger } from '../logger.ts';

export type ErrorDeps = { log: Logger; readiness?: Readiness };

/** The one place that turns an error into the contract's status code and body. */
export function errorResponse(error: unknown, c: Context, deps: ErrorDeps): Response {
  const { log } = deps;
  if (error instanceof ValidationFailed) return c.json({ detail: error.issues }, 422);
  const storage = asStorageUnavailable(error);
  if (storage) {
    // Said once per failing request, without a stack: the sentence is what the operator acts on.
    log.warn('storage failure', { method: c.req.method, path: c.req.path, problem: storage.message, code: codeOf(error) });
    deps.readiness?.storageFailed(storage.message);
    error = storage;
  }
  if (isClientAbort(error)) {
    // The client went away mid-request (closed its connection while sending a body): nobody reads
    // this answer, and it is the client's doing, not a fault of the server.
    log.info('request aborted by the client', { method: c.req.method, path: c.req.path });
    c.header('connection', 'close');
    return c.json({ detail: 'The client closed the connection before the request was complete.' }, 400);
  }
  if (error instanceof DomainError) {
    const retryAfter = error instanceof Unavailable || error instanceof TooManyRequests ? error.retryAfterSeconds : undefined;
    if (retryAfter !== undefined) c.header('retry-after', String(retryAfter));
    if (error instanceof Unavailable && error.closeConnection) c.header('connection', 'close');
    return c.json({ detail: error.message }, statusOf(error.kind));
  }
  // The request's own id (its log lines carry it too), so the answer leads an operator to them.
  const requestId = requestScope()?.requestId ?? crypto.randomUUID();
  log.error('unhandled error', {
    method: c.req.method,
    path: c.req.path,
    error: error instanceof Error ? (error.stack ?? error.message) : String(error),
  });
  return c.json({ detail: 'Internal server error', request_id: requestId }, 500);
}

/**
 * The contract's status code of each kind of domain error. Exhaustive: a kind added to
 * `DomainErrorKind` without a case here is a compile error (`unmapped` cannot be `never`), so no
 * new error silently becomes some default status.
 */
export function statusOf(kind: DomainErrorKind): ContentfulStatusCode {
  switch (kind) {
    case 'BadRequest':
      return 400;
    case 'Unauthorized':
      return 401;
    case 'Forbidden':
      return 403;
    case 'NotFound':
      return 404;
    case 'Conflict':
      return 409;
    case 'PayloadTooLarge':
      return 413;
    case 'UnsupportedMediaType':
      return 415;
    case 'ValidationFailed':
      return 422;
    case 'TooManyRequests':
      return 429;
    case 'Unavailable':
    case 'StorageUnavailable':
      return 503;
    default: {
      const unmapped: never = kind;
      throw new Error(`No status code for the domain error kind ${String(unmapped)}.`);
    }
  }
}

/**
 * Node's request stream fails with `Error: aborted` (code ECONNRESET) when the client closes the
 * connection before its body was sent. The request's `signal` is not consulted: reading it makes
 * @hono/node-server build the full Request, and after a 413 whose body was drained that was seen
 * to close the keep-alive connection under the client's next request (test/fault/fuzz-every-route).
 */
function isClientAbort(error: unknown): boolean {
  return error instanceof Error && error.message === 'aborted' && (error as { code?: unknown }).code === 'ECONNRESET';
}

function codeOf(error: unknown): string | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}
