import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { type RevisionAnswer, RevisionWait } from '../domain/revision-wait.ts';
import { revisionEtag } from '../domain/revisions.ts';
import type { Services } from '../services.ts';
import type { RevisionRecord } from '../store/types.ts';
import { apiKeyFrom, nodeHeader, REQUEST_ID_HEADER } from './node-request.ts';
import { requestIdFor } from './request-id.ts';
import { matchesCurrent, preferredWaitMs, revisionBody, storedRevisionJson } from './revision-answer.ts';

/** A Node request handler; the fallback is the Hono app's (@hono/node-server's listener). */
export type NodeListener = (req: IncomingMessage, res: ServerResponse) => void;

const HEX = '[0-9a-fA-F]';
const UUID = `${HEX}{8}-${HEX}{4}-${HEX}{4}-${HEX}{4}-${HEX}{12}`;
/** The route this lane answers, as its metrics label (the template, as Hono registers it). */
const REVISION_ROUTE = '/v2/deployments/:deployment_id/revisions/:revision_id';
/** Exactly the revision route's path with two UUIDs: no query, no trailing slash, no escapes. */
const REVISION_PATH = new RegExp(`^/v2/deployments/${UUID}/revisions/${UUID}$`);
/** Where the two ids stand in such a path (tested, not matched: a match array and its strings per request). */
const DEPLOYMENT_ID_AT = '/v2/deployments/'.length;
const REVISION_ID_AT = DEPLOYMENT_ID_AT + 36 + '/revisions/'.length;
const UPPER_HEX = /[A-F]/;

/**
 * The plain `GET /v2/deployments/{id}/revisions/{rid}` (the Action polls it on every deploy) and
 * its conditional long-poll, answered in Node's request handler before Hono: Hono's router and
 * @hono/node-server's Request/Response adaptation cost more than the SQL, and a thousand woken
 * long-polls each went through them. Without this lane (or with a first-registered Hono route in
 * its place) GET revision stays below 65% of a bare server running the same SQL; the measurements
 * are in docs/decisions/revision-fast-lane.md. It answers only when everything is ordinary: a GET without
 * body or X-Tenant-Id, a key whose check is cached in memory (`Auth.cachedPrincipal`), a revision
 * that exists. Anything else — errors, HEAD, a key seen for the first time — goes to `fallback`
 * (Hono) untouched, which answers it as always.
 *
 * The answers are byte for byte Hono's (same status line, headers in the same order and case,
 * same body): `test/e2e/fast-path.test.ts` compares the two for the same requests, so they cannot
 * drift. Hono's only per-request header is the request's id (`X-Request-Id`), written here too;
 * no log line is written for this route.
 */
export function revisionFastPath(
  services: Pick<Services, 'auth' | 'revisions' | 'metrics'>,
  fallback: NodeListener,
  options: { observed?: boolean } = {},
): NodeListener {
  const { auth, revisions, metrics } = services;
  // Counted under the route's template, as Hono's answers are (`observeRequests`). `observed:
  // false` (bench/observability-cost.ts only, beside an app composed without `observeRequests`):
  // neither counted nor given a request id.
  const observed = options.observed ?? true;
  const answered = observed
    ? (started: number, status: number) => metrics.httpAnswered('GET', REVISION_ROUTE, status, (performance.now() - started) / 1000)
    : () => {};
  const idOf = observed ? (req: IncomingMessage) => requestIdFor(nodeHeader(req, REQUEST_ID_HEADER)) : () => undefined;
  const lane: Lane = { fallback, answered, idOf };
  return (req, res) => {
    const url = req.url ?? '';
    if (req.method !== 'GET' || !REVISION_PATH.test(url)) return fallback(req, res);
    const headers = req.headers;
    // A body (never read for a GET) or another workspace: Hono's.
    if (headers['transfer-encoding'] !== undefined || (headers['content-length'] ?? '0') !== '0') return fallback(req, res);
    const principal = auth.cachedPrincipal(apiKeyFrom(req, nodeHeader), nodeHeader(req, 'x-tenant-id'), req.socket.remoteAddress);
    if (!principal) return fallback(req, res);
    const started = performance.now();
    // Ids are compared lower-case, as the route's schema makes them; most clients send them so.
    const upper = UPPER_HEX.test(url);
    const deploymentId = upper ? url.slice(DEPLOYMENT_ID_AT, DEPLOYMENT_ID_AT + 36).toLowerCase() : url.slice(DEPLOYMENT_ID_AT, DEPLOYMENT_ID_AT + 36);
    const revisionId = upper ? url.slice(REVISION_ID_AT).toLowerCase() : url.slice(REVISION_ID_AT);
    // The route's own logic (routes/revisions.ts) and answer (revision-answer.ts), down to the
    // domain calls; only the writing to Node's response differs.
    const known = nodeHeader(req, 'if-none-match');
    if (known) {
      // The request's state is its own waiter: a held request holds no closure or promise chain.
      revisions.hold(
        new HeldRevisionRequest(lane, req, res, known, started, principal.workspaceId, deploymentId, revisionId),
        preferredWaitMs(nodeHeader(req, 'prefer')) ?? 0,
      );
      return;
    }
    revisions.read(principal.workspaceId, deploymentId, revisionId, (error, revision) => {
      // Hono makes the error answer (the store fails there too, or answers by then), and the 404.
      if (error || !revision) return fallback(req, res);
      answer(res, idOf(req), revision, storedRevisionJson(revision));
      answered(started, 200);
    });
  };
}

/** What every request of one lane shares: one reference from each held request, not three closures. */
type Lane = {
  fallback: NodeListener;
  answered: (started: number, status: number) => void;
  idOf: (req: IncomingMessage) => string | undefined;
};

/**
 * A conditional GET of the lane, held while it waits: the route's own logic (routes/revisions.ts)
 * and answer (revision-answer.ts), as one object that is the request's waiter
 * (`Revisions.hold`), so a thousand held requests hold a thousand of these and their `cancel`s.
 */
class HeldRevisionRequest extends RevisionWait {
  readonly #lane: Lane;
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  /** The request's If-None-Match. */
  readonly #known: string;
  readonly #started: number;
  /** Whether the wait started: then Hono, answering a failure, must not wait again. */
  #waited = false;
  /** The status answered while the watch still held this request (`notify`'s first pass), to count once released. */
  #uncounted = 0;

  constructor(
    lane: Lane,
    req: IncomingMessage,
    res: ServerResponse,
    known: string,
    started: number,
    tenantId: string,
    deploymentId: string,
    revisionId: string,
  ) {
    super(tenantId, deploymentId, revisionId);
    this.#lane = lane;
    this.#req = req;
    this.#res = res;
    this.#known = known;
    this.#started = started;
  }

  isKnown(etag: string): boolean {
    return matchesCurrent(this.#known, etag);
  }

  // When the client goes away: the response's 'close' (as `clientGone` for Hono's routes). `on`,
  // not `once`, which would wrap `cancel` in one more function per waiter; the wait always unregisters.
  protected override watchGone(): void {
    this.#waited = true;
    this.#res.on('close', this.cancel);
  }

  protected override unwatchGone(): void {
    this.#res.off('close', this.cancel);
  }

  protected override afterRelease(): void {
    if (this.#uncounted === 0) return;
    this.#lane.answered(this.#started, this.#uncounted);
    this.#uncounted = 0;
  }

  answered(_error: unknown, result?: RevisionAnswer): void {
    const req = this.#req;
    const res = this.#res;
    const lane = this.#lane;
    if (result) {
      if (result.changed) {
        const woken = wokenBody(result.revision);
        answer(res, lane.idOf(req), result.revision, woken.body, result.etag, woken.length);
      } else notModified(res, lane.idOf(req), result.revision, result.etag);
      // Woken with a thousand others, the count waits until every one of them is answered (`afterRelease`).
      if (this.settling) this.#uncounted = result.changed ? 200 : 304;
      else lane.answered(this.#started, result.changed ? 200 : 304);
      return;
    }
    // Hono makes the error answer (an unknown revision: 404 before any wait). A failure after the
    // wait (the re-read a change from another process asks for) is answered at once: the client
    // already waited, and one that has gone gets nothing.
    if (res.destroyed || res.writableEnded) return;
    if (this.#waited) withoutHeader(req, 'prefer');
    lane.fallback(req, res);
  }
}

/** The record `wokenBody` last answered, and its body with the body's length in bytes. */
let wokenRecord: RevisionRecord | undefined;
let woken = { body: '', length: 0 };

/**
 * A held request's body and its length, once per record: the waiters woken by one change are
 * answered one after another with the same record (`RevisionWatch.notify`), and each measured the
 * same body's bytes again (and looked it up in `revisionBody`'s map), where a bare server measures
 * it once for all.
 */
function wokenBody(revision: RevisionRecord): { body: string; length: number } {
  if (revision !== wokenRecord) {
    const body = revisionBody(revision);
    wokenRecord = revision;
    woken = { body, length: Buffer.byteLength(body) };
  }
  return woken;
}

/** Removes a header before the request goes on to Hono (which reads `rawHeaders`). */
function withoutHeader(req: IncomingMessage, name: string): void {
  const kept: string[] = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() !== name) kept.push(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
  req.rawHeaders = kept;
  delete req.headers[name];
}

/**
 * 200 with the revision, the headers in the order and case in which @hono/node-server writes the
 * route's `jsonResponse` (the route's `revisionHeaders`, written out here into the one object:
 * `test/e2e/fast-path.test.ts` compares the bytes). `body` is the route's: for a conditional GET
 * serialized once per record (`revisionBody`: the thousand waiters woken by one change share one
 * string), for a plain GET serialized for it alone (`storedRevisionJson`), as the route does.
 */
function answer(
  res: ServerResponse,
  requestId: string | undefined,
  revision: RevisionRecord,
  body: string,
  // Given by a held request, shared by the waiters of one change.
  etag = revisionEtag(revision),
  length = Buffer.byteLength(body),
): void {
  // Every header in one object made at once: a `setHeader` before `writeHead` makes Node pass
  // each of the others through `setHeader` too. The request id's header (REQUEST_ID_HEADER) is
  // written out: an object literal with a computed key is built by a slow runtime call (~5 µs an
  // answer in a profile of a thousand woken waiters); fast-path.test.ts compares the bytes with Hono's.
  const headers: OutgoingHttpHeaders =
    requestId === undefined
      ? { 'content-type': 'application/json', etag, 'cache-control': 'no-cache', 'Content-Length': length }
      : { 'x-request-id': requestId, 'content-type': 'application/json', etag, 'cache-control': 'no-cache', 'Content-Length': length };
  try {
    res.writeHead(200, headers);
    res.end(body);
  } catch {
    unwritable(res);
  }
}

/** 304 as @hono/node-server writes the route's bodiless Response (headers through `Headers`: sorted, plus its default content type). */
function notModified(res: ServerResponse, requestId: string | undefined, revision: RevisionRecord, etag = revisionEtag(revision)): void {
  const headers: OutgoingHttpHeaders =
    requestId === undefined
      ? { 'cache-control': 'no-cache', etag, 'content-type': 'text/plain; charset=UTF-8' }
      : { 'x-request-id': requestId, 'cache-control': 'no-cache', etag, 'content-type': 'text/plain; charset=UTF-8' };
  try {
    res.writeHead(304, headers);
    res.end();
  } catch {
    unwritable(res);
  }
}

/**
 * Writing an answer cannot fail in any way known here; should it, the connection is closed rather
 * than the error left to stop the process (thrown from a store's callback, or as an unhandled
 * rejection from one that settled a promise).
 */
function unwritable(res: ServerResponse): void {
  res.destroy();
}
