import { z } from 'zod';
import type { TokenEndpointAuthMethod } from '../../../shared/schemas/oauth.ts';
import { readLimited } from '../../lib/read-limited.ts';
import { PayloadTooLarge } from '../errors.ts';

/** What a token request needs to know about the provider; the secret is already decrypted. */
export type TokenClient = {
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
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
  /** No usable answer: network failure, timeout, 5xx, or a body that is not a token response. */
  | { ok: false; kind: 'unavailable'; error: string; description: string | null };

const TOKEN_REQUEST_TIMEOUT_MS = 15_000;
const MAX_RESPONSE_BYTES = 256 * 1024;

const TokenResponse = z.object({
  access_token: z.string().min(1),
  token_type: z.string().optional(),
  refresh_token: z.string().min(1).optional(),
  expires_in: z.coerce.number().nonnegative().optional(),
  scope: z.string().optional(),
});

const ErrorResponse = z.object({ error: z.string().min(1), error_description: z.string().optional() });

/** `application/x-www-form-urlencoded` encoding of one value (RFC 6749 Appendix B). */
export function formEncode(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}

/**
 * POSTs a token request (authorization_code or refresh_token grant) to the provider's token
 * endpoint with the provider's client authentication: `client_secret_post` puts the id and secret
 * in the form; `client_secret_basic` sends them form-encoded in HTTP Basic (RFC 6749 §2.3.1).
 * Redirects are not followed: a token endpoint that redirects would take the secret elsewhere.
 */
export async function requestToken(client: TokenClient, params: Record<string, string>): Promise<TokenResult> {
  const form = new URLSearchParams(params);
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    // Some providers (GitHub) answer form-encoded unless asked for JSON.
    accept: 'application/json',
  };
  if (client.authMethod === 'client_secret_basic') {
    const credentials = `${formEncode(client.clientId)}:${formEncode(client.clientSecret)}`;
    headers.authorization = `Basic ${Buffer.from(credentials, 'utf8').toString('base64')}`;
  } else {
    form.set('client_id', client.clientId);
    form.set('client_secret', client.clientSecret);
  }

  let response: Response;
  let text: string;
  try {
    response = await fetch(client.tokenUrl, {
      method: 'POST',
      headers,
      body: form.toString(),
      redirect: 'manual',
      signal: AbortSignal.timeout(TOKEN_REQUEST_TIMEOUT_MS),
    });
    text = await readText(response);
  } catch (error) {
    return { ok: false, kind: 'unavailable', error: 'token_endpoint_unreachable', description: error instanceof Error ? error.message : String(error) };
  }

  const body = parseBody(text, response.headers.get('content-type') ?? '');
  const oauthError = ErrorResponse.safeParse(body);
  // GitHub answers some errors with 200 and an `error` field, so look for one whatever the status.
  if (oauthError.success) {
    const kind = response.status >= 500 ? 'unavailable' : 'rejected';
    return { ok: false, kind, error: oauthError.data.error, description: oauthError.data.error_description ?? null };
  }
  if (response.status !== 200) {
    return { ok: false, kind: response.status >= 500 ? 'unavailable' : 'rejected', error: 'token_endpoint_error', description: `The token endpoint answered HTTP ${response.status}` };
  }
  const parsed = TokenResponse.safeParse(body);
  if (!parsed.success) {
    return { ok: false, kind: 'unavailable', error: 'invalid_token_response', description: 'The token endpoint answered without an access_token' };
  }
  const token = parsed.data;
  return {
    ok: true,
    token: {
      accessToken: token.access_token,
      tokenType: token.token_type ?? null,
      refreshToken: token.refresh_token ?? null,
      expiresIn: token.expires_in ?? null,
      scopes: token.scope === undefined ? null : token.scope.split(' ').filter((s) => s !== ''),
    },
  };
}

/** Reads at most MAX_RESPONSE_BYTES: a hostile token endpoint must not fill our memory. */
async function readText(response: Response): Promise<string> {
  try {
    return new TextDecoder().decode(await readLimited(response, MAX_RESPONSE_BYTES));
  } catch (error) {
    if (error instanceof PayloadTooLarge) throw new Error('The token endpoint answered with a body that is too large');
    throw error;
  }
}

function parseBody(text: string, contentType: string): unknown {
  if (/application\/x-www-form-urlencoded/i.test(contentType)) return Object.fromEntries(new URLSearchParams(text));
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}
