import { publicRevision, publicStoredRevision, revisionEtag } from '../domain/revisions.ts';
import type { RevisionRecord } from '../store/types.ts';

/**
 * The answer of `GET /v2/deployments/{id}/revisions/{rid}`, written once for the two places that
 * send it: the Hono route (`routes/revisions.ts`) and the fast lane in front of Hono
 * (`revision-fast-lane.ts`). Both take the wait, the ETag comparison, the body and the headers
 * from here, so the two cannot answer differently.
 */

const MAX_WAIT_SECONDS = 60;

/**
 * `Prefer: wait=<seconds>` (RFC 7240), capped at 60; null when absent. A preference that cannot be
 * understood is ignored, as RFC 7240 asks, which makes the request an ordinary conditional GET.
 */
export function preferredWaitMs(header: string | undefined): number | null {
  if (!header) return null;
  const match = /(?:^|[,;\s])wait\s*=\s*"?([^",;\s]*)"?/i.exec(header);
  if (!match) return null;
  const seconds = Number(match[1]);
  if (!Number.isFinite(seconds) || seconds < 0) return null;
  return Math.min(seconds, MAX_WAIT_SECONDS) * 1000;
}

const QUOTE = 0x22;

/**
 * Whether `If-None-Match` names the current ETag: `*`, or a comma-separated list of tags compared
 * weakly (a `W/` prefix is ignored), as RFC 9110 says for If-None-Match.
 */
export function matchesCurrent(ifNoneMatch: string, etag: string): boolean {
  // The usual header, one strong tag (the one the client was given), needs no splitting: it
  // matches exactly or not at all (every woken waiter asks this of the changed revision).
  if (ifNoneMatch === etag) return true;
  if (ifNoneMatch.charCodeAt(0) === QUOTE && ifNoneMatch.charCodeAt(ifNoneMatch.length - 1) === QUOTE && !ifNoneMatch.includes(',')) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}

/** The answer's body for a record from anywhere (a change announced to waiters). */
export function revisionJson(revision: RevisionRecord): string {
  return JSON.stringify(publicRevision(revision));
}

/** The answer's body for a record the store read for this request alone (a plain GET): see `publicStoredRevision`. */
export function storedRevisionJson(revision: RevisionRecord): string {
  return JSON.stringify(publicStoredRevision(revision));
}

/**
 * The answer's body of a conditional GET, serialized once per record: the waiters woken by one
 * change all hold the same announced record, so a thousand of them share one `JSON.stringify`.
 * Not for plain GETs: every entry of a WeakMap whose key is still in the young generation is work
 * for each young-generation collection, and at thousands of GETs a second those entries made the
 * collections' pauses grow with the time between them (`bench/RESULTS.md` has the measurements).
 */
const bodies = new WeakMap<RevisionRecord, string>();
export function revisionBody(revision: RevisionRecord): string {
  let body = bodies.get(revision);
  if (body === undefined) bodies.set(revision, (body = revisionJson(revision)));
  return body;
}

/**
 * The headers of both answers (200 and 304), in the order they are written: a plain object, so
 * @hono/node-server writes it straight to the socket without building a `Headers` object.
 */
export function revisionHeaders(revision: RevisionRecord): { etag: string; 'cache-control': 'no-cache' } {
  return { etag: revisionEtag(revision), 'cache-control': 'no-cache' };
}
