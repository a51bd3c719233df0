import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';

/** Hosts to which plain `http` is allowed: the request never leaves the machine. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  if (host === 'localhost' || host === '[::1]') return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * An authorization-server endpoint: an absolute `https` URL, or `http` on a loopback host only,
 * so a client secret or code is never sent in clear text over the network. No fragment (RFC 6749 §3.1).
 */
export const EndpointUrl = z
  .string()
  .max(2048)
  .superRefine((value, ctx) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      ctx.addIssue({ code: 'invalid_format', format: 'url', message: 'Input should be a valid URL', input: value });
      return;
    }
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
      ctx.addIssue({ code: 'custom', message: 'URL must use https (http is allowed only for loopback hosts: localhost, 127.0.0.0/8, ::1)', input: value });
    } else if (url.hash !== '') {
      ctx.addIssue({ code: 'custom', message: 'URL must not contain a fragment', input: value });
    } else if (url.username !== '' || url.password !== '') {
      ctx.addIssue({ code: 'custom', message: 'URL must not contain credentials', input: value });
    }
  });

export const ProviderSlug = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, { message: 'provider_id must be 1-64 characters of A-Z, a-z, 0-9, _, . and -, starting with a letter or digit' });

export const CodeChallengeMethod = z.enum(['S256', 'plain']);
export type CodeChallengeMethod = z.infer<typeof CodeChallengeMethod>;

export const TokenEndpointAuthMethod = z.enum(['client_secret_post', 'client_secret_basic']);
export type TokenEndpointAuthMethod = z.infer<typeof TokenEndpointAuthMethod>;

const Text = z.string().min(1).max(1024);

export const OAuthProviderCreate = z.strictObject({
  provider_id: ProviderSlug,
  name: z.string().min(1).max(255),
  client_id: Text,
  client_secret: Text,
  auth_url: EndpointUrl,
  token_url: EndpointUrl,
  uses_pkce: z.boolean().default(false),
  code_challenge_method: CodeChallengeMethod.default('S256'),
  token_endpoint_auth_method: TokenEndpointAuthMethod.default('client_secret_post'),
});
export type OAuthProviderCreate = z.infer<typeof OAuthProviderCreate>;

/** Every field may be omitted or null (= unchanged); `provider_id` may not change (400). */
export const OAuthProviderPatch = z.strictObject({
  provider_id: ProviderSlug.nullish(),
  name: z.string().min(1).max(255).nullish(),
  client_id: Text.nullish(),
  client_secret: Text.nullish(),
  auth_url: EndpointUrl.nullish(),
  token_url: EndpointUrl.nullish(),
  uses_pkce: z.boolean().nullish(),
  code_challenge_method: CodeChallengeMethod.nullish(),
  token_endpoint_auth_method: TokenEndpointAuthMethod.nullish(),
});
export type OAuthProviderPatch = z.infer<typeof OAuthProviderPatch>;

/** The seed's provider shape (plus `token_endpoint_auth_method`); never the client secret. */
export const OAuthProvider = z.object({
  id: Uuid,
  organization_id: Uuid,
  provider_id: z.string(),
  name: z.string(),
  client_id: z.string(),
  auth_url: z.string(),
  token_url: z.string(),
  uses_pkce: z.boolean(),
  code_challenge_method: CodeChallengeMethod,
  token_endpoint_auth_method: TokenEndpointAuthMethod,
  created_at: Timestamp,
  updated_at: Timestamp,
  /** Always `custom`: every provider here is configured by its endpoints. */
  provider_type: z.string(),
});
export type OAuthProvider = z.infer<typeof OAuthProvider>;

/** RFC 6749 §3.3 scope-token: printable ASCII without space, `"` or `\`. */
const ScopeToken = z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]{1,256}$/, { message: 'A scope must be 1-256 printable ASCII characters without spaces, " or \\' });

const OwnerId = z.string().min(1).max(255);

export const AuthenticateRequest = z.strictObject({
  provider: ProviderSlug,
  scopes: z.array(ScopeToken).max(100),
  user_id: OwnerId.nullish(),
  agent_id: OwnerId.nullish(),
  /** Accepted for compatibility; tokens are keyed by `user_id` / `agent_id`. */
  platform_user_id: z.string().max(255).nullish(),
  use_agent_builder_public_oauth: z
    .boolean()
    .default(false)
    .refine((value) => value === false, { message: 'This server has no public OAuth app; configure a provider and leave this false' }),
});
export type AuthenticateRequest = z.infer<typeof AuthenticateRequest>;

export const AuthenticateStatus = z.enum(['completed', 'pending']);

export const AuthenticateResponse = z.object({
  status: AuthenticateStatus,
  /** Where to send the user (pending), else null. */
  url: z.string().nullable(),
  /** The flow to wait on (pending), else null. */
  auth_id: Uuid.nullable(),
  /** The access token (completed), else null. */
  token: z.string().nullable(),
});
export type AuthenticateResponse = z.infer<typeof AuthenticateResponse>;

export const WaitQuery = z.object({
  timeout: z.coerce.number().int().min(0).max(60).default(30),
});
export type WaitQuery = z.infer<typeof WaitQuery>;

export const WaitStatus = z.enum(['completed', 'pending', 'timeout', 'failed', 'not_found']);
export type WaitStatus = z.infer<typeof WaitStatus>;

export const WaitResponse = z.object({
  status: WaitStatus,
  token: z.string().nullable(),
  /** For `failed`: the OAuth error code (`access_denied`, `expired`, `token_exchange_failed`, …). */
  error: z.string().nullable(),
  error_description: z.string().nullable(),
});
export type WaitResponse = z.infer<typeof WaitResponse>;
