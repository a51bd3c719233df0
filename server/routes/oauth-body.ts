import type { Context } from 'hono';
import { z } from 'zod';
import { ValidationFailed } from '../domain/errors.ts';
import { readJson, toValidationIssues, validate } from '../http/validation.ts';

/** At most this many `Warning` values for one request; the rest are counted in one more. */
const MAX_WARNINGS = 20;
/** Nesting is at most 64 deep (readJson refuses more), so this many rounds reach every level. */
const MAX_ROUNDS = 65;

/**
 * Reads an OAuth route's JSON body the way contract §2 says every route will: fields the schema
 * does not know are dropped and each is named in a `Warning: 299 - "Unknown field ignored:
 * body.<path>"` header; a known field with a wrong value is still 422.
 *
 * Why here and not in server/http/validation.ts: the `compat` branch changes that shared hook for
 * the whole API (`readJson(c, schema, { unknownFields: 'ignore' })`) while this branch is apart;
 * this file keeps the OAuth routes on the same rule without touching it. After both are merged,
 * this helper can become a call to that option.
 */
export async function readOAuthBody<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  // The shared reader's checks (media type, size, UTF-8, JSON, depth, `__proto__`), no schema yet.
  const value: unknown = await readJson(c, z.unknown());
  let current = value;
  const ignored: string[] = [];
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const result = schema.safeParse(current);
    if (result.success) {
      warn(c, ignored);
      return result.data;
    }
    const unknown = result.error.issues.filter((issue) => issue.code === 'unrecognized_keys');
    if (unknown.length === 0) throw new ValidationFailed(toValidationIssues(result.error, 'body', current));
    // Work on a copy: the request's parsed value is never changed.
    if (current === value) current = structuredClone(value);
    for (const issue of unknown) {
      let parent: unknown = current;
      for (const key of issue.path) parent = parent !== null && typeof parent === 'object' ? (parent as Record<PropertyKey, unknown>)[key] : undefined;
      if (parent === null || typeof parent !== 'object') continue;
      for (const key of issue.keys) {
        delete (parent as Record<string, unknown>)[key];
        ignored.push(['body', ...issue.path.map(String), key].join('.'));
      }
    }
  }
  return validate(schema, current, 'body');
}

function warn(c: Context, ignored: string[]): void {
  for (const path of ignored.slice(0, MAX_WARNINGS)) c.header('Warning', warningValue(`Unknown field ignored: ${path.slice(0, 200)}`), { append: true });
  if (ignored.length > MAX_WARNINGS) c.header('Warning', warningValue(`${ignored.length - MAX_WARNINGS} more unknown fields ignored`), { append: true });
}

/** `299 - "<text>"`, the text as a quoted string of printable ASCII (a header cannot carry more). */
function warningValue(text: string): string {
  const quoted = JSON.stringify(text).replace(/[^\x20-\x7e]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return `299 - ${quoted}`;
}
