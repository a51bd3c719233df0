import type { Context } from 'hono';
import { signalGone, type Gone } from '../domain/revision-watch.ts';

type NodeEnv = { outgoing?: { once(event: 'close', listener: () => void): unknown; off(event: 'close', listener: () => void): unknown }; incoming?: { headers: Record<string, string | string[] | undefined>; rawHeaders: string[]; socket?: { remoteAddress?: string } } } | undefined;

/**
 * Headers of which Node keeps only the first when a request repeats them, where `Headers.get`
 * joins them all: for these the raw list is read, so both paths answer the same.
 */
const FIRST_ONLY = new Set(['authorization', 'content-type', 'content-length', 'user-agent', 'referer', 'host', 'if-modified-since', 'if-unmodified-since', 'from', 'location', 'max-forwards', 'proxy-authorization', 'age', 'expires', 'etag', 'last-modified', 'server', 'retry-after']);

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

/**
 * A JSON answer whose headers are a plain object: @hono/node-server then writes status, headers and
 * body straight to the socket (its `responseViaCache` path) without building a `Headers` object,
 * as `c.json` after `c.header` does. Only for handlers that set every header themselves.
 */
export function jsonResponse(body: string, status: number, headers: Record<string, string>): Response {
  return new Response(body, { status, headers: { 'content-type': 'application/json', ...headers } });
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
