import { z } from 'zod';
import { lazySchema } from './lazy.ts';

/** Every id in the API is a UUID string; upper case is accepted and read as lower case. */
export const Uuid = lazySchema(() => z.uuid().toLowerCase());

/** RFC 3339 UTC timestamps with milliseconds, as `Date.prototype.toISOString()` writes them. */
export const Timestamp = lazySchema(() => z.iso.datetime());

/**
 * A deployment's name: 1–63 letters, digits, `-` and `_`, starting with a letter or digit (the hosted
 * API's own example creates `my_deployment`). Where a DNS-safe form is needed it is derived
 * (`dnsSafeName` in server/domain/names.ts).
 */
export const ResourceName = lazySchema(() =>
  z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/, {
    message: 'Name must be 1-63 characters of letters, digits, - and _, starting with a letter or digit',
  }),
);

/** The `{resources, offset}` envelope every list route answers with. */
export function page<T extends z.ZodType>(item: T) {
  return lazySchema(() => z.object({ resources: z.array(item), offset: z.int() }));
}

/** `limit` / `offset` query parameters shared by the list routes. */
export const PageQuery = lazySchema(() =>
  z.object({
    limit: z.coerce.number().int().min(1).max(100).default(20),
    offset: z.coerce.number().int().min(0).default(0),
  }),
);
export type PageQuery = z.infer<typeof PageQuery>;

/** `{"detail": "<sentence>"}`: the body of every error but 422. */
export const ErrorDetail = lazySchema(() => z.object({ detail: z.string() }));
export type ErrorDetail = z.infer<typeof ErrorDetail>;

/** One entry of a 422 body, in FastAPI's shape. */
export const ValidationIssue = lazySchema(() =>
  z.object({
    loc: z.array(z.union([z.string(), z.int()])),
    msg: z.string(),
    type: z.string(),
  }),
);
export type ValidationIssue = z.infer<typeof ValidationIssue>;

/** The 422 body (`HTTPValidationError`). */
export const HTTPValidationError = lazySchema(() => z.object({ detail: z.array(ValidationIssue) }));
export type HTTPValidationError = z.infer<typeof HTTPValidationError>;
