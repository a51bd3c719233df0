import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

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
export const EndpointUrl = lazySchema(() =>
  z
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
    }),
);

export const ProviderSlug = lazySchema(() =>
  z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, {
    message: 'provider_id must be 1-64 characters of A-Z, a-z, 0-9, _, . and -, starting with a letter or digit',
  }),
);

export const CodeChallengeMethod = lazySchema(() => z.enum(['S256', 'plain']));
export type CodeChallengeMethod = z.infer<typeof CodeChallengeMethod>;

/** How the client authenticates at the token endpoint; `none` is a public client (PKCE required). */
export const TokenEndpointAuthMethod = lazySchema(() => z.enum(['client_secret_post', 'client_secret_basic', 'none']));
export type TokenEndpointAuthMethod = z.infer<typeof TokenEndpointAuthMethod>;

/** The hosted API's presets; stored and answered as given (this server has no preset behaviour). */
export const ProviderType = lazySchema(() => z.enum(['microsoft', 'salesforce', 'slack']));

const Text = lazySchema(() => z.string().min(1).max(1024));

/** A public client has no secret and must use PKCE; a confidential one needs its secret. */
function checkClientAuth(
  value: { token_endpoint_auth_method?: TokenEndpointAuthMethod | null; client_secret?: string | null; uses_pkce?: boolean | null },
  ctx: z.RefinementCtx,
): void {
  if (value.token_endpoint_auth_method === 'none') {
    if (value.client_secret != null)
      ctx.addIssue({
        code: 'custom',
        path: ['client_secret'],
        message: 'A public client (token_endpoint_auth_method none) has no client_secret',
        input: value.client_secret,
      });
    if (value.uses_pkce === false)
      ctx.addIssue({ code: 'custom', path: ['uses_pkce'], message: 'A public client (token_endpoint_auth_method none) must use PKCE', input: value.uses_pkce });
  }
}

export const OAuthProviderCreate = lazySchema(() =>
  z
    .strictObject({
      provider_id: ProviderSlug,
      name: z.string().min(1).max(255),
      client_id: Text,
      client_secret: Text.nullish(),
      auth_url: EndpointUrl,
      token_url: EndpointUrl,
      uses_pkce: z.boolean().default(false),
      code_challenge_method: CodeChallengeMethod.default('S256'),
      provider_type: ProviderType.nullish(),
      token_endpoint_auth_method: TokenEndpointAuthMethod.default('client_secret_post'),
    })
    .superRefine((value, ctx) => {
      checkClientAuth(value, ctx);
      if (value.token_endpoint_auth_method !== 'none' && value.client_secret == null) {
        ctx.addIssue({
          code: 'custom',
          path: ['client_secret'],
          message: `client_secret is required with token_endpoint_auth_method ${value.token_endpoint_auth_method}`,
          input: value.client_secret,
        });
      }
    }),
);
export type OAuthProviderCreate = z.infer<typeof OAuthProviderCreate>;

/** Every field may be omitted or null (= unchanged); `provider_id` may not change (400). */
export const OAuthProviderPatch = lazySchema(() =>
  z
    .strictObject({
      provider_id: ProviderSlug.nullish(),
      name: z.string().min(1).max(255).nullish(),
      client_id: Text.nullish(),
      client_secret: Text.nullish(),
      auth_url: EndpointUrl.nullish(),
      token_url: EndpointUrl.nullish(),
      uses_pkce: z.boolean().nullish(),
      code_challenge_method: CodeChallengeMethod.nullish(),
      provider_type: ProviderType.nullish(),
      token_endpoint_auth_method: TokenEndpointAuthMethod.nullish(),
    })
    .superRefine(checkClientAuth),
);
export type OAuthProviderPatch = z.infer<typeof OAuthProviderPatch>;

/** The hosted API's `OAuthProviderResponse` (plus `token_endpoint_auth_method`); never the client secret. */
export const OAuthProvider = lazySchema(() =>
  z.object({
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
    /** The preset named at create, or null. */
    provider_type: z.string().nullable(),
    /** Always null: providers are not discovered from MCP servers here. */
    mcp_server_url: z.string().nullable(),
    /** Always false: no dynamic client registration here. */
    is_dynamic_client: z.boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  }),
);
export type OAuthProvider = z.infer<typeof OAuthProvider>;

export const OAuthProviderList = lazySchema(() => z.array(OAuthProvider));

/** `DELETE` answers of the OAuth routes (the SDK reads `message`). */
export const OAuthMessage = lazySchema(() => z.object({ message: z.string() }));
export type OAuthMessage = z.infer<typeof OAuthMessage>;

/** RFC 6749 §3.3 scope-token: printable ASCII without space, `"` or `\`. */
const ScopeToken = lazySchema(() =>
  z.string().regex(/^[\x21\x23-\x5B\x5D-\x7E]{1,256}$/, { message: 'A scope must be 1-256 printable ASCII characters without spaces, " or \\' }),
);

const OwnerId = lazySchema(() => z.string().min(1).max(255));

export const AuthenticateRequest = lazySchema(() =>
  z.strictObject({
    provider: ProviderSlug,
    scopes: z.array(ScopeToken).max(100),
    user_id: OwnerId.nullish(),
    /** The hosted API's own user id; here the token's owner when `user_id` is not given. */
    ls_user_id: OwnerId.nullish(),
    agent_id: OwnerId.nullish(),
    /** Accepted for compatibility; tokens are keyed by `user_id` / `agent_id`. */
    platform_user_id: z.string().max(255).nullish(),
    use_agent_builder_public_oauth: z
      .boolean()
      .default(false)
      .refine((value) => value === false, { message: 'This server has no public OAuth app; configure a provider and leave this false' }),
    /** Start a new flow even when a stored token covers the scopes. */
    force_new: z.boolean().default(false),
    /** Use this stored token (of the caller's workspace and this provider) rather than the owner's. */
    token_id: Uuid.nullish(),
    /** Marked on the token the flow obtains. */
    is_default: z.boolean().default(true),
  }),
);
export type AuthenticateRequest = z.infer<typeof AuthenticateRequest>;

export const AuthenticateStatus = lazySchema(() => z.enum(['completed', 'pending']));

/** What is known of the token handed out (`completed`); no secret in it. */
export const TokenMetadata = lazySchema(() =>
  z.object({
    token_id: Uuid,
    scopes: z.array(z.string()),
    expires_at: Timestamp.nullable(),
    token_type: z.string().nullable(),
    is_default: z.boolean(),
    provider_account_label: z.string().nullable(),
  }),
);

export const AuthenticateResponse = lazySchema(() =>
  z.object({
    status: AuthenticateStatus,
    /** Where to send the user (pending), else null. */
    url: z.string().nullable(),
    /** The flow to wait on (pending), else null. */
    auth_id: Uuid.nullable(),
    /** The access token (completed), else null. */
    token: z.string().nullable(),
    /** The token's owner (`user_id`, else `ls_user_id`), or null. */
    user_id: z.string().nullable(),
    /** For `completed`: the token's metadata; else null. */
    metadata: TokenMetadata.nullable(),
  }),
);
export type AuthenticateResponse = z.infer<typeof AuthenticateResponse>;

/** The hosted API's `OAuthTokenSummary`, plus whose token it is; never the token itself. */
export const OAuthTokenSummary = lazySchema(() =>
  z.object({
    id: Uuid,
    /** The provider's slug. */
    provider_id: z.string(),
    user_id: z.string().nullable(),
    agent_id: z.string().nullable(),
    provider_account_label: z.string().nullable(),
    scopes: z.array(z.string()),
    expires_at: Timestamp.nullable(),
    is_default: z.boolean(),
    created_at: Timestamp,
    updated_at: Timestamp,
  }),
);
export type OAuthTokenSummary = z.infer<typeof OAuthTokenSummary>;
export const OAuthTokenList = lazySchema(() => z.array(OAuthTokenSummary));

export const TokensQuery = lazySchema(() => z.object({ provider_id: ProviderSlug.optional() }));
export const TokensDeleteQuery = lazySchema(() => z.object({ provider_id: ProviderSlug }));
/** `user_id` / `agent_id` narrow the question to one owner; without them: any token of the provider. */
export const TokensExistsQuery = lazySchema(() => z.object({ provider_id: ProviderSlug, user_id: OwnerId.optional(), agent_id: OwnerId.optional() }));

/** `{exists}` as the contract says, and `has_token` as the hosted document names it. */
export const TokensExistsResponse = lazySchema(() => z.object({ exists: z.boolean(), has_token: z.boolean() }));

export const TokensDeleteResponse = lazySchema(() => z.object({ message: z.string(), deleted: z.int() }));

export const OAuthTokenMetadataPatch = lazySchema(() =>
  z.strictObject({
    provider_account_label: z.string().max(255).nullish(),
    is_default: z.boolean().nullish(),
  }),
);
export type OAuthTokenMetadataPatch = z.infer<typeof OAuthTokenMetadataPatch>;

/** The hosted API's `OAuthFinalizeRequest`: a front end that received the redirect hands on the code. */
export const CallbackFinalize = lazySchema(() =>
  z.object({
    code: z.string().max(4096).optional(),
    state: z.string().max(1024).optional(),
    error: z.string().max(1024).optional(),
    error_description: z.string().max(4096).optional(),
  }),
);

export const WaitQuery = lazySchema(() =>
  z.object({
    timeout: z.coerce.number().int().min(0).max(60).default(30),
  }),
);
export type WaitQuery = z.infer<typeof WaitQuery>;

export const WaitStatus = lazySchema(() => z.enum(['completed', 'pending', 'timeout', 'failed', 'not_found']));
export type WaitStatus = z.infer<typeof WaitStatus>;

export const WaitResponse = lazySchema(() =>
  z.object({
    status: WaitStatus,
    token: z.string().nullable(),
    /** For `failed`: the OAuth error code (`access_denied`, `expired`, `token_exchange_failed`, …). */
    error: z.string().nullable(),
    error_description: z.string().nullable(),
  }),
);
export type WaitResponse = z.infer<typeof WaitResponse>;
