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
  override readonly name = 'Unavailable';
}
