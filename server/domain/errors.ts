import type { ValidationIssue } from '../../shared/schemas/common.ts';

/**
 * The kinds of error the domain throws: a closed set. `server/http/errors.ts` maps each kind to one
 * status code in a `switch` that stops compiling when a kind is added here and not mapped there.
 */
export type DomainErrorKind =
  | 'NotFound'
  | 'Conflict'
  | 'BadRequest'
  | 'Unauthorized'
  | 'Forbidden'
  | 'ValidationFailed'
  | 'PayloadTooLarge'
  | 'UnsupportedMediaType'
  | 'Unavailable'
  | 'StorageUnavailable'
  | 'TooManyRequests';

/**
 * The errors the domain throws, one class per kind; nothing below the routes knows about HTTP.
 * Abstract, so that every error names its kind: a new class cannot be thrown without one.
 */
export abstract class DomainError extends Error {
  override readonly name: string = 'DomainError';
  abstract readonly kind: DomainErrorKind;
}

/** The resource does not exist, or belongs to another workspace (never say which). */
export class NotFound extends DomainError {
  override readonly name = 'NotFound';
  readonly kind = 'NotFound';
}
/** A name or other unique value is already taken. */
export class Conflict extends DomainError {
  override readonly name = 'Conflict';
  readonly kind = 'Conflict';
}
/** A rule that needs stored state is broken (the contract's 400). */
export class BadRequest extends DomainError {
  override readonly name = 'BadRequest';
  readonly kind = 'BadRequest';
}
export class Unauthorized extends DomainError {
  override readonly name = 'Unauthorized';
  readonly kind = 'Unauthorized';
}
export class Forbidden extends DomainError {
  override readonly name = 'Forbidden';
  readonly kind = 'Forbidden';
}
/** The request itself is malformed (the contract's 422), with FastAPI-shaped issues. */
export class ValidationFailed extends DomainError {
  override readonly name = 'ValidationFailed';
  readonly kind = 'ValidationFailed';
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    super(issues.map((issue) => issue.msg).join('; '));
    this.issues = issues;
  }
}
/** The body is larger than the route accepts (413). */
export class PayloadTooLarge extends DomainError {
  override readonly name = 'PayloadTooLarge';
  readonly kind = 'PayloadTooLarge';
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
  readonly kind = 'UnsupportedMediaType';
}
/** A service this route depends on is not configured or not available. */
export class Unavailable extends DomainError {
  override readonly name: string = 'Unavailable';
  readonly kind: 'Unavailable' | 'StorageUnavailable' = 'Unavailable';
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
  override readonly kind = 'StorageUnavailable';
}
/** Too many requests of some kind from one client (429); `retryAfterSeconds` says when to try again. */
export class TooManyRequests extends DomainError {
  override readonly name = 'TooManyRequests';
  readonly kind = 'TooManyRequests';
  readonly retryAfterSeconds: number;
  constructor(message: string, retryAfterSeconds: number) {
    super(message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
