import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { z } from 'zod';
import { lazySchema } from '../../../shared/schemas/lazy.ts';
import type { TokenEndpointAuthMethod } from '../../../shared/schemas/oauth.ts';
import { type OutboundPolicy, OutboundRefused } from './outbound.ts';

/** What a token request needs to know about the provider; the secret is already decrypted. */
export type TokenClient = {
  tokenUrl: string;
  clientId: string;
  /** Null for a public client (`none`). */
  clientSecret: string | null;
  authMethod: TokenEndpointAuthMethod;
};

export type IssuedToken = {
  accessToken: string;
  tokenType: string | null;
  refreshToken: string | null;
  /** Seconds, when the provider said. */
  expiresIn: number | null;
  /** The granted scopes, when the provider said (RFC 6749 §5.1: omitted = as requested). */
  scopes: string[] | null;
};

export type TokenResult =
  | { ok: true; token: IssuedToken }
  /** The provider answered with an OAuth error (`invalid_grant`, …): retrying will not help. */
  | { ok: false; kind: 'rejected'; error: string; description: string | null }
  /** The provider answered 200, but not with a token response we can use (a hostile or broken answer). */
  | { ok: false; kind: 'invalid'; error: string; description: string | null }
  /** No usable answer: refused by the address policy, network failure, timeout, 5xx. */
  | { ok: false; kind: 'unavailable'; error: string; description: string | null };

const TOKEN_REQUEST_TIMEOUT_MS = 15_000;
const MAX_RESPONSE_BYTES = 256 * 1024;
/** Longer than any real token (JWTs with many claims are a few KiB); more is refused, not stored. */
const MAX_TOKEN_CHARS = 16 * 1024;
/** Ten years: a longer lifetime is not a lifetime a provider means, and would overflow a date. */
const MAX_EXPIRES_IN_S = 10 * 365 * 24 * 3600;
/** How much of a provider's own words (its `error_description`) is shown and kept. */
export const PROVIDER_TEXT_EXCERPT = 200;

/** Seconds as a JSON number or a string of digits (some providers send "3600"); null = not said. */
const Seconds = lazySchema(() =>
  z
    .union([
      z.number(),
      z
        .string()
        .regex(/^\d{1,12}$/, { message: 'must be a number of seconds' })
        .transform(Number),
    ])
    .pipe(
      z
        .number()
        .finite()
        .min(0, { message: 'must not be negative' })
        .max(MAX_EXPIRES_IN_S, { message: `must be at most ${MAX_EXPIRES_IN_S} seconds` }),
    )
    .transform((value) => Math.floor(value)),
);

/** RFC 6749 §5.1, checked so that no answer can make the callback fail or store nonsense. */
const TokenResponse = lazySchema(() =>
  z.object({
    access_token: z
      .string()
      .min(1, { message: 'is empty' })
      .max(MAX_TOKEN_CHARS, { message: `is longer than ${MAX_TOKEN_CHARS} characters` }),
    token_type: z.string().max(64).nullish(),
    refresh_token: z
      .string()
      .max(MAX_TOKEN_CHARS, { message: `is longer than ${MAX_TOKEN_CHARS} characters` })
      .nullish(),
    expires_in: Seconds.nullish(),
    // A space-separated string (RFC 6749); some providers send a list.
    scope: z.union([z.string().max(8192), z.array(z.string().max(256)).max(1000)]).nullish(),
  }),
);

const ErrorResponse = lazySchema(() => z.object({ error: z.string().min(1), error_description: z.string().nullish() }));

/** A provider's error code, if it looks like one (RFC 6749 §5.2 charset, short); else a neutral one. */
export function providerErrorCode(error: string): string {
  return /^[A-Za-z0-9_.:-]{1,64}$/.test(error) ? error : 'provider_error';
}

/** At most PROVIDER_TEXT_EXCERPT characters of a provider's text, control characters dropped. */
export function excerpt(text: string | null | undefined): string | null {
  if (text === null || text === undefined) return null;
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/[\u0000-\u001f\u007f]+/g, ' ').trim();
  if (clean === '') return null;
  return clean.length > PROVIDER_TEXT_EXCERPT ? `${clean.slice(0, PROVIDER_TEXT_EXCERPT)}…` : clean;
}

/** `application/x-www-form-urlencoded` encoding of one value (RFC 6749 Appendix B). */
export function formEncode(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}

/** The one description of every connection failure: refused, reset, timed out, no such host alike, so it tells nothing about a port. */
const UNREACHABLE = 'The token endpoint could not be reached.';

/**
 * POSTs a token request (authorization_code or refresh_token grant) to the provider's token
 * endpoint with the provider's client authentication: `client_secret_post` puts the id and secret
 * in the form; `client_secret_basic` sends them form-encoded in HTTP Basic (RFC 6749 §2.3.1);
 * `none` (a public client) sends only the id. The host is resolved and checked by `policy`, and
 * the connection goes to the address that was checked. Redirects are not followed: a token
 * endpoint that redirects would take the secret elsewhere.
 */
export async function requestToken(client: TokenClient, params: Record<string, string>, policy: OutboundPolicy): Promise<TokenResult> {
  const form = new URLSearchParams(params);
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    // Some providers (GitHub) answer form-encoded unless asked for JSON.
    accept: 'application/json',
  };
  if (client.authMethod === 'client_secret_basic') {
    const credentials = `${formEncode(client.clientId)}:${formEncode(client.clientSecret ?? '')}`;
    headers.authorization = `Basic ${Buffer.from(credentials, 'utf8').toString('base64')}`;
  } else {
    form.set('client_id', client.clientId);
    if (client.authMethod === 'client_secret_post') form.set('client_secret', client.clientSecret ?? '');
  }

  let answer: { status: number; contentType: string; text: string };
  try {
    answer = await post(new URL(client.tokenUrl), headers, form.toString(), policy);
  } catch (error) {
    if (error instanceof OutboundRefused) return { ok: false, kind: 'unavailable', error: 'token_endpoint_forbidden', description: error.message };
    return { ok: false, kind: 'unavailable', error: 'token_endpoint_unreachable', description: UNREACHABLE };
  }

  const body = parseBody(answer.text, answer.contentType);
  const oauthError = ErrorResponse.safeParse(body);
  // GitHub answers some errors with 200 and an `error` field, so look for one whatever the status.
  if (oauthError.success) {
    const kind = answer.status >= 500 ? 'unavailable' : 'rejected';
    return { ok: false, kind, error: providerErrorCode(oauthError.data.error), description: excerpt(oauthError.data.error_description) };
  }
  if (answer.status !== 200) {
    return {
      ok: false,
      kind: answer.status >= 500 ? 'unavailable' : 'rejected',
      error: 'token_endpoint_error',
      description: `The token endpoint answered HTTP ${answer.status}.`,
    };
  }
  const parsed = TokenResponse.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue?.path.length ? String(issue.path[0]) : null;
    const why =
      body === null || typeof body !== 'object' || Array.isArray(body)
        ? 'it is not a JSON object'
        : field
          ? `${field} ${issue!.message}`
          : (issue?.message ?? 'it is malformed');
    return { ok: false, kind: 'invalid', error: 'invalid_token_response', description: `The token endpoint's answer is not a usable token response: ${why}.` };
  }
  const token = parsed.data;
  const scopes = token.scope == null ? null : Array.isArray(token.scope) ? token.scope : token.scope.split(' ').filter((s) => s !== '');
  return {
    ok: true,
    token: {
      accessToken: token.access_token,
      tokenType: token.token_type ?? null,
      refreshToken: token.refresh_token ? token.refresh_token : null,
      expiresIn: token.expires_in ?? null,
      scopes,
    },
  };
}

/**
 * One POST with node:http(s), so the connection's address can be pinned: the `lookup` the socket
 * uses hands back the address `policy` resolved and checked (for an IP literal Node does no
 * look-up, and `pinnedAddress` has checked the literal). TLS SNI and `Host` stay the URL's name.
 */
export async function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
  policy: OutboundPolicy,
): Promise<{ status: number; contentType: string; text: string }> {
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('unsupported scheme');
  const pinned = await policy.pinnedAddress(url);
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if (options.all) (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, lookup, timeout: TOKEN_REQUEST_TIMEOUT_MS, agent: false },
      (res) => {
        readBody(res).then((text) => resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), text }), reject);
      },
    );
    // One deadline for the whole exchange, not only for idle sockets.
    const deadline = setTimeout(() => req.destroy(new Error('timeout')), TOKEN_REQUEST_TIMEOUT_MS);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.on('close', () => clearTimeout(deadline));
    req.end(body);
  });
}

/** Reads at most MAX_RESPONSE_BYTES: a hostile token endpoint must not fill our memory. */
function readBody(res: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_RESPONSE_BYTES) {
        res.destroy(new Error('The token endpoint answered with a body that is too large'));
        return;
      }
      chunks.push(chunk);
    });
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new Error('aborted')));
  });
}

function parseBody(text: string, contentType: string): unknown {
  if (/application\/x-www-form-urlencoded/i.test(contentType)) return Object.fromEntries(new URLSearchParams(text));
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
