import type { ValidationIssue } from '../../shared/schemas/common.ts';

/**
 * The closed set of errors the domain throws. `app.ts` maps each to one status code and body;
 * nothing below the routes knows about HTTP.
 */
export class DomainError extends Error {
  override readonly name: string = 'DomainError';
}

/** The resource does not exist, or belongs to another workspace (never say which). */
export class NotFound extends DomainError {
  override readonly name = 'NotFound';
}
/** A name or other unique value is already taken. */
export class Conflict extends DomainError {
  override readonly name = 'Conflict';
}
/** A rule that needs stored state is broken (the contract's 400). */
export class BadRequest extends DomainError {
  override readonly name = 'BadRequest';
}
export class Unauthorized extends DomainError {
  override readonly name = 'Unauthorized';
}
export class Forbidden extends DomainError {
  override readonly name = 'Forbidden';
}
/** The request itself is malformed (the contract's 422), with FastAPI-shaped issues. */
export class ValidationFailed extends DomainError {
  override readonly name = 'ValidationFailed';
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    super(issues.map((issue) => issue.msg).join('; '));
    this.issues = issues;
  }
}
/** The body is larger than the route accepts (413). */
export class PayloadTooLarge extends DomainError {
  override readonly name = 'PayloadTooLarge';
  /** Whether the whole body was read (the connection can be kept) or reading stopped early. */
  readonly drained: boolean;
  constructor(message: string, options: { drained?: boolean } = {}) {
    super(message);
    this.drained = options.drained ?? true;
  }
}
/** The body is not of a media type the route accepts (415). */
export class UnsupportedMediaType extends DomainError {
  override readonly name = 'UnsupportedMediaType';
}
/** A service this route depends on is not configured or not available. */
export class Unavailable extends DomainError {
  override readonly name: string = 'Unavailable';
  /** Seconds after which a retry may succeed (the answer's `Retry-After`); none when unknown. */
  readonly retryAfterSeconds: number | undefined;
  /** Whether the connection is closed after the answer (part of the request body was left unread). */
  readonly closeConnection: boolean;
  constructor(message: string, options: { retryAfterSeconds?: number; closeConnection?: boolean } = {}) {
    super(message);
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.closeConnection = options.closeConnection ?? false;
  }
}
/**
 * The database cannot take writes (or reads) right now: disk full, I/O error, read-only, locked.
 * Nothing was changed; the same request may succeed once the operator fixes the storage.
 */
export class StorageUnavailable extends Unavailable {
  override readonly name = 'StorageUnavailable';
}
/** Too many requests of some kind from one client (429); `retryAfterSeconds` says when to try again. */
export class TooManyRequests extends DomainError {
  override readonly name = 'TooManyRequests';
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
