import type { Context } from 'hono';
import { PayloadTooLarge } from '../domain/errors.ts';
import { type Gone, signalGone } from '../lib/revision-watch.ts';

type NodeEnv =
  | {
      outgoing?: {
        once(event: 'close', listener: () => void): unknown;
        off(event: 'close', listener: () => void): unknown;
        setHeader(name: string, value: string): unknown;
      };
      incoming?: { headers: Record<string, string | string[] | undefined>; rawHeaders: string[]; socket?: { remoteAddress?: string } };
    }
  | undefined;

/**
 * Headers of which Node keeps only the first when a request repeats them, where `Headers.get`
 * joins them all: for these the raw list is read, so both paths answer the same.
 */
const FIRST_ONLY = new Set([
  'authorization',
  'content-type',
  'content-length',
  'user-agent',
  'referer',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'from',
  'location',
  'max-forwards',
  'proxy-authorization',
  'age',
  'expires',
  'etag',
  'last-modified',
  'server',
  'retry-after',
]);

/**
 * A request header, read from Node's own parsed headers when the request came over a socket.
 * `c.req.header()` goes through the WHATWG `Headers` object, which @hono/node-server builds (and
 * validates, header by header) on first use: the largest single cost of a small GET. Node has
 * already lower-cased and trimmed the names and values. In-process requests (`app.request()`, the
 * tests' helper) have no Node request and use the `Headers` path.
 */
export function requestHeader(c: Context, name: string): string | undefined {
  const incoming = (c.env as NodeEnv)?.incoming;
  if (!incoming) return c.req.header(name);
  return nodeHeader(incoming, name);
}

/** A header of Node's request, as `Headers.get` would answer it (see `requestHeader`). */
export function nodeHeader(incoming: { headers: Record<string, string | string[] | undefined>; rawHeaders: string[] }, name: string): string | undefined {
  const value = incoming.headers[name];
  if (value === undefined || !FIRST_ONLY.has(name)) {
    // Node joins other repeated headers with ", " as `Headers.get` does (set-cookie is never read here).
    return typeof value === 'string' || value === undefined ? value : value.join(', ');
  }
  const raw = incoming.rawHeaders;
  let joined: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === name.length && raw[i]!.toLowerCase() === name) joined = joined === undefined ? raw[i + 1]! : `${joined}, ${raw[i + 1]!}`;
  }
  return joined;
}

/** The TCP peer's address; undefined for in-process requests (`app.request()`), which have no socket. */
export function clientAddress(c: Context): string | undefined {
  return (c.env as NodeEnv)?.incoming?.socket?.remoteAddress;
}

/** The header that carries a request's id, both ways. */
export const REQUEST_ID_HEADER = 'x-request-id';

/**
 * A JSON answer whose headers are a plain object: @hono/node-server then writes status, headers and
 * body straight to the socket (its `responseViaCache` path) without building a `Headers` object,
 * as `c.json` after `c.header` does. Only for handlers that set every header themselves.
 */
export function jsonResponse(body: string, status: number, headers: Record<string, string>): Response {
  return new Response(body, { status, headers: { 'content-type': 'application/json', ...headers } });
}

/**
 * Adds a header to whatever answer the request gets, on Node's response itself: Node writes it with
 * the headers @hono/node-server gives, so no answer has to be rebuilt with a `Headers` object (an
 * answer whose headers are a plain object is written straight to the socket). In-process requests
 * (`app.request()`, no Node response) get it through Hono's context instead.
 */
export function setAnswerHeader(c: Context, name: string, value: string): void {
  const outgoing = (c.env as NodeEnv | undefined)?.outgoing;
  if (outgoing) outgoing.setHeader(name, value);
  else c.header(name, value);
}

/**
 * When the client of a held request goes away: Node's response 'close' (the connection closed).
 * `c.req.raw.signal` would tell the same, but reading it makes @hono/node-server build the whole
 * WHATWG Request with its AbortController: kilobytes per held request, a thousand of them held.
 */
export function clientGone(c: Context): Gone {
  const outgoing = (c.env as NodeEnv)?.outgoing;
  if (!outgoing) return signalGone(c.req.raw.signal);
  return (cancel) => {
    outgoing.once('close', cancel);
    return () => outgoing.off('close', cancel);
  };
}

/**
 * The API key of a request: X-Api-Key (trimmed), else an `Authorization: Bearer` token.
 * `header(request, name)` reads one of `request`'s headers: the request is passed along rather than
 * closed over, so a caller makes no function per request.
 */
export function apiKeyFrom<R>(request: R, header: (request: R, name: string) => string | undefined): string | undefined {
  const key = header(request, 'x-api-key');
  if (key) return key.trim();
  const authorization = header(request, 'authorization');
  const bearer = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  return bearer?.[1];
}

type NodeBody = {
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
  once(event: 'end', listener: () => void): unknown;
  once(event: 'error', listener: (error: Error) => void): unknown;
  off(event: string, listener: (...args: never[]) => void): unknown;
  destroy(): unknown;
  readonly readableFlowing: boolean | null;
};

/**
 * Node's request stream of a request that came over a socket, while nothing reads it yet;
 * undefined in process (`app.request()`), and once anything built the WHATWG Request's body (e.g.
 * a `c.req.header()` call builds the Request, whose web stream starts pulling the Node stream at
 * once): that body is the one to read then, or its first chunks would be missed here.
 */
export function nodeBody(c: Context): NodeBody | undefined {
  const incoming = (c.env as { incoming?: NodeBody } | undefined)?.incoming;
  return incoming && incoming.readableFlowing === null ? incoming : undefined;
}

/**
 * `readLimited` (without a budget) on Node's request stream itself: reading `c.req.raw.body` makes
 * @hono/node-server build the whole WHATWG Request (headers validated one by one) and a web
 * stream over the Node stream, more than the rest of a small POST's handling. Same outcomes:
 * the body's bytes up to `limit`; past it, read on and thrown away up to `drainUpTo` (then
 * `PayloadTooLarge`, drained), or beyond that the stream destroyed (`drained: false`), as the web
 * stream's cancel does; a client that goes away mid-body rejects with Node's own error.
 */
export function readNodeBody(body: NodeBody, limit: number, drainUpTo: number): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      body.off('data', onData);
      body.off('end', onEnd);
      body.off('error', onError);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > drainUpTo) {
        done();
        body.destroy();
        reject(new PayloadTooLarge(`The body is larger than the limit of ${limit} bytes.`, { drained: false }));
        return;
      }
      if (size <= limit) chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      if (size > limit) reject(new PayloadTooLarge(`The body is larger than the limit of ${limit} bytes.`, { drained: true }));
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error) => {
      done();
      reject(error);
    };
    body.on('data', onData);
    body.once('end', onEnd);
    body.once('error', onError);
  });
}
