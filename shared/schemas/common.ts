import { z } from 'zod';

/** Every id in the API is a UUID string; upper case is accepted and read as lower case. */
export const Uuid = z.uuid().toLowerCase();

/** RFC 3339 UTC timestamps with milliseconds, as `Date.prototype.toISOString()` writes them. */
export const Timestamp = z.iso.datetime();

/** A 1–63 character name: `a-z`, `0-9` and `-`, starting with a letter, not ending with `-`. */
export const ResourceName = z
  .string()
  .regex(/^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/, {
    message: 'Name must be 1-63 characters of a-z, 0-9 and -, start with a letter and not end with -',
  });

/** The `{resources, offset}` envelope every list route answers with. */
export function page<T extends z.ZodType>(item: T) {
  return z.object({ resources: z.array(item), offset: z.int() });
}

/** `limit` / `offset` query parameters shared by the list routes. */
export const PageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
});
export type PageQuery = z.infer<typeof PageQuery>;

/** `{"detail": "<sentence>"}`: the body of every error but 422. */
export const ErrorDetail = z.object({ detail: z.string() });
export type ErrorDetail = z.infer<typeof ErrorDetail>;

/** One entry of a 422 body, in FastAPI's shape. */
export const ValidationIssue = z.object({
  loc: z.array(z.union([z.string(), z.int()])),
  msg: z.string(),
  type: z.string(),
});
export type ValidationIssue = z.infer<typeof ValidationIssue>;

/** The 422 body (`HTTPValidationError`). */
export const HTTPValidationError = z.object({ detail: z.array(ValidationIssue) });
export type HTTPValidationError = z.infer<typeof HTTPValidationError>;
