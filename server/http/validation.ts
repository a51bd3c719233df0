import type { Context } from 'hono';
import { z } from 'zod';
import type { ValidationIssue } from '../../shared/schemas/common.ts';
import { lazySchema } from '../../shared/schemas/lazy.ts';
import { PayloadTooLarge, UnsupportedMediaType, ValidationFailed } from '../domain/errors.ts';
import { readLimited } from '../domain/read-limited.ts';
import { auditFields } from '../lib/request-scope.ts';
import { nodeBody, readNodeBody, requestHeader } from './node-request.ts';

export { readLimited };

type Where = 'body' | 'query' | 'path' | 'header';

/** The query of a signed URL (a source upload, a claimed revision's source): when it expires and its signature. */
export const SignedUrlQuery = lazySchema(() => z.object({ expires: z.string(), signature: z.string() }));

export const API_BODY_LIMIT = 1024 * 1024;
/** JSON nested deeper than this is refused: no legitimate body needs it, and deep values cost stack later. */
const MAX_JSON_DEPTH = 64;

const TYPE_NAMES: Record<string, string> = {
  string: 'string_type',
  number: 'float_type',
  int: 'int_type',
  boolean: 'bool_type',
  object: 'model_type',
  array: 'list_type',
  null: 'none_required',
};

/** Turns zod issues into FastAPI-shaped ones: `loc` starts with where the value came from. */
export function toValidationIssues(error: z.ZodError, where: Where, input: unknown): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const issue of error.issues) {
    const loc = [where, ...issue.path.map((p) => (typeof p === 'number' ? p : String(p)))];
    switch (issue.code) {
      case 'invalid_type': {
        if (valueAt(input, issue.path) === undefined) {
          issues.push({ loc, msg: 'Field required', type: 'missing' });
        } else {
          issues.push({ loc, msg: `Input should be a valid ${issue.expected}`, type: TYPE_NAMES[issue.expected] ?? 'type_error' });
        }
        break;
      }
      case 'unrecognized_keys':
        for (const key of issue.keys) issues.push({ loc: [...loc, key], msg: 'Extra inputs are not permitted', type: 'extra_forbidden' });
        break;
      case 'invalid_value':
        issues.push({ loc, msg: `Input should be ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}`, type: 'enum' });
        break;
      case 'invalid_union':
        if ('discriminator' in issue && issue.discriminator) {
          const missing = valueAt(input, issue.path) === undefined;
          const options = ((issue as { options?: unknown[] }).options ?? []).map((o) => JSON.stringify(o)).join(' or ');
          issues.push(missing ? { loc, msg: 'Field required', type: 'missing' } : { loc, msg: `Input should be ${options}`, type: 'enum' });
        } else {
          issues.push({ loc, msg: issue.message, type: 'value_error' });
        }
        break;
      case 'invalid_format':
        issues.push({ loc, msg: formatMessage(issue.format, issue.message), type: formatType(issue.format) });
        break;
      case 'too_small':
        issues.push({
          loc,
          msg: issue.message,
          type: issue.origin === 'string' ? 'string_too_short' : issue.origin === 'array' ? 'too_short' : 'greater_than_equal',
        });
        break;
      case 'too_big':
        issues.push({
          loc,
          msg: issue.message,
          type: issue.origin === 'string' ? 'string_too_long' : issue.origin === 'array' ? 'too_long' : 'less_than_equal',
        });
        break;
      default: {
        // A refinement may name its pydantic type (e.g. `missing` for a field required only sometimes).
        const named = issue.code === 'custom' ? (issue.params as { type?: unknown } | undefined)?.type : undefined;
        issues.push({ loc, msg: issue.message, type: typeof named === 'string' ? named : 'value_error' });
      }
    }
  }
  return issues;
}

function formatType(format: string): string {
  if (format === 'uuid') return 'uuid_parsing';
  if (format === 'url') return 'url_parsing';
  if (format === 'regex') return 'string_pattern_mismatch';
  if (format === 'datetime') return 'datetime_parsing';
  return 'value_error';
}

function formatMessage(format: string, message: string): string {
  if (format === 'uuid') return 'Input should be a valid UUID';
  return message;
}

function valueAt(input: unknown, path: ReadonlyArray<PropertyKey>): unknown {
  let value = input;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/** Parses `value` with `schema`, or throws `ValidationFailed` with issues located at `where`. */
export function validate<S extends z.ZodType>(schema: S, value: unknown, where: Where): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationFailed(toValidationIssues(result.error, where, value));
  return result.data;
}

/** At most this many `Warning` values are sent for one request; the rest are counted in one more. */
const MAX_WARNINGS = 20;

export type ReadJsonOptions = {
  limit?: number;
  /**
   * `ignore` (default, contract §2 for every route): fields the schema does not know are dropped
   * and each is named in a `Warning: 299 - "Unknown field ignored: body.<path>"` header value (the
   * hosted API's clients send undocumented fields such as `tracked_packages`). `refuse`: 422
   * `extra_forbidden`, for a body whose every key must be understood.
   */
  unknownFields?: 'ignore' | 'refuse';
  /**
   * `refuse` (default): a string or key holding a NUL character is 422 at its place. PostgreSQL
   * cannot store NUL in text or jsonb, so one rule here keeps both backends answering alike.
   * `keep` (string values only; keys are always checked): for reports whose text the domain sanitises instead (an agent's log lines and status
   * messages quote build output, and must land whatever it holds).
   */
  nulCharacters?: 'refuse' | 'keep';
};

/** How `route()` reads a route's JSON body: `readJson`'s options, and what a request without a body means. */
export type BodyReading = ReadJsonOptions & {
  /**
   * `empty-object`: a request with no body at all (no Content-Type, no length) is read as `{}`, for
   * a body whose every field is optional. Unset: it is 415, as any body that is not JSON.
   */
  emptyBody?: 'empty-object';
};

/**
 * Reads the body as strict JSON: a JSON content type, at most `limit` bytes, valid UTF-8, valid
 * JSON, nesting at most 64 deep; then validates it. Raw text is read once and never re-serialised.
 */
export async function readJson<S extends z.ZodType>(c: Context, schema: S, options: number | ReadJsonOptions = {}): Promise<z.output<S>> {
  const { limit = API_BODY_LIMIT, unknownFields = 'ignore', nulCharacters = 'refuse' } = typeof options === 'number' ? { limit: options } : options;
  const value = await readJsonValue(c, limit, nulCharacters === 'refuse');
  auditFields(value);
  if (unknownFields === 'refuse') return validate(schema, value, 'body');
  const { data, ignored } = validateIgnoringUnknown(schema, value);
  warnIgnored(c, ignored);
  return data;
}

/**
 * Validates `value`, dropping the keys the schema reports as unrecognized (a copy is changed, never
 * the input) until only real problems are left. Answers the data and the dotted paths dropped.
 */
export function validateIgnoringUnknown<S extends z.ZodType>(schema: S, value: unknown): { data: z.output<S>; ignored: string[] } {
  let current = value;
  const ignored: string[] = [];
  // Each round drops every key reported; a key is reported only once its parent parsed, so nested
  // unknown keys inside a failing sibling may need another round. Bounded: depth is at most 64.
  for (let round = 0; round <= MAX_JSON_DEPTH; round++) {
    const result = schema.safeParse(current);
    if (result.success) return { data: result.data, ignored };
    const unknown = result.error.issues.filter((issue) => issue.code === 'unrecognized_keys');
    if (unknown.length === 0) throw new ValidationFailed(toValidationIssues(result.error, 'body', current));
    if (current === value) current = structuredClone(value);
    for (const issue of unknown) {
      const parent = valueAt(current, issue.path);
      if (parent === null || typeof parent !== 'object') continue;
      for (const key of issue.keys) {
        delete (parent as Record<string, unknown>)[key];
        ignored.push(['body', ...issue.path.map(String), key].join('.'));
      }
    }
  }
  return { data: validate(schema, current, 'body'), ignored };
}

/** One `Warning` header value per ignored field (RFC 7234 code 299, as Kubernetes does). */
export function warnIgnored(c: Context, ignored: string[]): void {
  for (const path of ignored.slice(0, MAX_WARNINGS)) c.header('Warning', warningValue(`Unknown field ignored: ${path.slice(0, 200)}`), { append: true });
  if (ignored.length > MAX_WARNINGS) c.header('Warning', warningValue(`${ignored.length - MAX_WARNINGS} more unknown fields ignored`), { append: true });
}

/** `299 - "<text>"`, the text as a quoted string of printable ASCII (a header cannot carry more). */
function warningValue(text: string): string {
  const quoted = JSON.stringify(text).replace(/[^\x20-\x7e]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `299 - ${quoted}`;
}

async function readJsonValue(c: Context, limit: number, refuseNul: boolean): Promise<unknown> {
  const contentType = requestHeader(c, 'content-type') ?? '';
  if (!/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(contentType)) {
    throw new UnsupportedMediaType('The body must be JSON, sent with Content-Type: application/json.');
  }
  const declared = Number(requestHeader(c, 'content-length') ?? '0');
  if (declared > limit) throw new PayloadTooLarge(`The body is larger than the limit of ${limit} bytes.`);
  // Read on (and discard) a moderately oversized body so the client gets the 413, not a broken pipe.
  // Over a socket, from Node's stream directly (no WHATWG Request built); in process, the Request's.
  const body = nodeBody(c);
  const bytes = body ? await readNodeBody(body, limit, 16 * limit) : await readLimited(c.req.raw, limit, { drainUpTo: 16 * limit });
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ValidationFailed([{ loc: ['body'], msg: 'The body is not valid UTF-8', type: 'json_invalid' }]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const position = /position (\d+)/.exec(String(error))?.[1];
    throw new ValidationFailed([{ loc: ['body', position ? Number(position) : 0], msg: 'JSON decode error', type: 'json_invalid' }]);
  }
  const problem = shapeProblem(value, refuseNul);
  if (problem) throw new ValidationFailed([problem]);
  return value;
}

/**
 * One walk over a parsed body for what no schema can check: nesting deeper than 64 (deep values
 * cost stack later), own `__proto__` keys (copying one into a new object sets its prototype
 * instead of storing the entry, and zod drops it for that reason: refuse it rather than lose it),
 * and, with `refuseNul`, NUL in any string or key (see `ReadJsonOptions.nulCharacters`).
 * Iterative, so a hostile body cannot exhaust the stack here. An object or array still to look
 * into is one `Nested`; a path is made only for the issue found. (An entry pair per key and a path
 * array per object, as `Object.entries` and copies made them, were ~6,000 instructions of a create's
 * ~1,400,000 under callgrind: docs/decisions/hot-paths-round-8.md.)
 */
function shapeProblem(root: unknown, refuseNul: boolean): ValidationIssue | null {
  if (refuseNul && typeof root === 'string' && root.includes('\0')) return nulIssue(['body']);
  if (root === null || typeof root !== 'object') return null;
  const stack: Nested[] = [{ value: root, depth: 0, parent: undefined, key: '' }];
  while (stack.length > 0) {
    const nested = stack.pop()!;
    const value = nested.value;
    if (nested.depth >= MAX_JSON_DEPTH) return { loc: ['body'], msg: `JSON is nested deeper than ${MAX_JSON_DEPTH} levels`, type: 'json_invalid' };
    if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index += 1) {
        const child: unknown = value[index];
        if (refuseNul && typeof child === 'string' && child.includes('\0')) return nulIssue(['body', ...pathOf(nested), index]);
        if (child !== null && typeof child === 'object') stack.push({ value: child, depth: nested.depth + 1, parent: nested, key: index });
      }
      continue;
    }
    if (Object.hasOwn(value, '__proto__'))
      return { loc: ['body', ...pathOf(nested), '__proto__'], msg: 'The key __proto__ is not allowed', type: 'value_error' };
    for (const key of Object.keys(value)) {
      const child: unknown = (value as Record<string, unknown>)[key];
      // Keys are never reported text: a NUL in one is refused in either mode.
      if (key.includes('\0') || (refuseNul && typeof child === 'string' && child.includes('\0'))) return nulIssue(['body', ...pathOf(nested), key]);
      if (child !== null && typeof child === 'object') stack.push({ value: child, depth: nested.depth + 1, parent: nested, key });
    }
  }
  return null;
}

/** An object or array of a body `shapeProblem` has still to look into, and where it is. */
type Nested = { value: object; depth: number; parent: Nested | undefined; key: string | number };

/** The keys from the body down to `nested` (none for the body itself). */
function pathOf(nested: Nested): Array<string | number> {
  const path: Array<string | number> = [];
  for (let at: Nested | undefined = nested; at.parent !== undefined; at = at.parent) path.push(at.key);
  return path.reverse();
}

function nulIssue(loc: Array<string | number>): ValidationIssue {
  return { loc, msg: 'Input should not contain NUL characters (\\u0000)', type: 'string_pattern_mismatch' };
}

/**
 * The request URL's own NUL rule (see `ReadJsonOptions.nulCharacters`): a `%00` in a query value
 * or key is 422 naming the parameter, one in the path is 422 at `["path"]`. Browsers and clients
 * never send one; a database lookup with it would fail on PostgreSQL alone.
 */
export function urlNulProblem(url: string): ValidationIssue | null {
  if (!url.includes('%00')) return null;
  const parsed = new URL(url, 'http://localhost');
  if (parsed.pathname.includes('%00')) return nulIssue(['path']);
  return formNulProblem(parsed.searchParams, 'query');
}

/** The same rule for form-encoded fields (`where`: the query string, or a form-encoded body). */
export function formNulProblem(fields: URLSearchParams, where: 'query' | 'body'): ValidationIssue | null {
  for (const [key, value] of fields) if (key.includes('\0') || value.includes('\0')) return nulIssue([where, key]);
  return null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A path parameter: with `schema`, its output (422 at `["path", name, …]` otherwise); without, a
 * UUID, lower-cased (422 `uuid_parsing` at `["path", name]` otherwise).
 */
export function pathParam(c: Context, name: string, schema?: z.ZodType): unknown {
  const value = c.req.param(name) ?? '';
  if (schema) {
    const result = schema.safeParse(value);
    if (!result.success)
      throw new ValidationFailed(toValidationIssues(result.error, 'path', value).map((issue) => ({ ...issue, loc: ['path', name, ...issue.loc.slice(1)] })));
    return result.data;
  }
  if (!UUID.test(value)) {
    throw new ValidationFailed([{ loc: ['path', name], msg: 'Input should be a valid UUID', type: 'uuid_parsing' }]);
  }
  return value.toLowerCase();
}

/**
 * A UUID path parameter, for the few handlers that read their path before `route()` does: a
 * `checkCaller` that needs the path's listener, a route that reads its own input (`ownInput`).
 */
export function pathId(c: Context, name: string): string {
  return pathParam(c, name) as string;
}
