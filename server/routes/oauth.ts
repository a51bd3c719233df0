import type { Context } from 'hono';
import {
  AuthenticateRequest,
  AuthenticateResponse,
  OAuthMessage,
  OAuthProvider,
  OAuthProviderCreate,
  OAuthProviderList,
  OAuthProviderPatch,
  OAuthTokenList,
  OAuthTokenMetadataPatch,
  OAuthTokenSummary,
  ProviderSlug,
  TokensDeleteQuery,
  TokensDeleteResponse,
  TokensExistsQuery,
  TokensExistsResponse,
  TokensQuery,
  WaitQuery,
  WaitResponse,
} from '../../shared/schemas/oauth.ts';
import { requireOrganizationScope } from '../domain/auth.ts';
import type { OAuth } from '../domain/oauth/oauth.ts';
import type { AppEnv, RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { oauthCallbackRoutes } from './oauth-callback.ts';

/**
 * OAuth helper routes in the hosted API's shapes (the langchain-auth SDK requires 200 on every
 * call): providers of the key's organization, by slug or id; tokens of the key's workspace;
 * authenticate, wait; the callback is in oauth-callback.ts.
 */
export function oauthRoutes(ctx: RouteContext, oauth: OAuth): void {
  const { providers, flows, tokens } = oauth;
  const tag = 'oauth';
  const base = '/v2/auth/providers';
  const org = (c: Context<AppEnv>) => c.get('principal').organizationId;
  const ws = (c: Context<AppEnv>) => c.get('principal').workspaceId;
  // Asked before the body is read, so a key that may not change providers never has its body parsed.
  const organizationScoped = (action: string) => (c: Context<AppEnv>) => requireOrganizationScope(c.get('principal'), action);
  /** `{provider_id}` is a slug (or the provider's id), not only a uuid: `route()` validates it with this schema. */
  const slugParam = { pathParams: { provider_id: ProviderSlug } };

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: base,
      summary: 'Create an OAuth provider',
      tag,
      body: OAuthProviderCreate,
      response: { status: 200, schema: OAuthProvider },
    },
    async (c, { body }) => c.json(await providers.create(org(c), body), 200),
    organizationScoped('create OAuth providers'),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: base,
      summary: 'List OAuth providers (a JSON array, newest first)',
      tag,
      response: { status: 200, schema: OAuthProviderList },
    },
    async (c) => c.json(await providers.list(org(c))),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: `${base}/:provider_id`,
      ...slugParam,
      summary: 'Get an OAuth provider by its provider_id (or id)',
      tag,
      response: { status: 200, schema: OAuthProvider },
    },
    async (c, { params }) => c.json(await providers.get(org(c), params.provider_id)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'patch',
      path: `${base}/:provider_id`,
      ...slugParam,
      summary: 'Update an OAuth provider (a new client secret may be set)',
      tag,
      body: OAuthProviderPatch,
      response: { status: 200, schema: OAuthProvider },
    },
    async (c, { params, body }) => c.json(await providers.patch(org(c), params.provider_id, body)),
    organizationScoped('change OAuth providers'),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: `${base}/:provider_id`,
      ...slugParam,
      summary: 'Delete an OAuth provider with its flows and tokens',
      tag,
      response: { status: 200, schema: OAuthMessage },
    },
    async (c, { params }) => {
      const deleted = await providers.delete(org(c), params.provider_id);
      return c.json({ message: `OAuth provider '${deleted.provider_id}' deleted.` });
    },
    organizationScoped('delete OAuth providers'),
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v2/auth/tokens',
      summary: "The workspace's stored tokens (no token values)",
      tag,
      query: TokensQuery,
      response: { status: 200, schema: OAuthTokenList },
    },
    async (c, { query }) => c.json(await tokens.list(org(c), ws(c), query.provider_id ?? null)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: '/v2/auth/tokens',
      summary: "Forget the workspace's tokens of a provider",
      tag,
      query: TokensDeleteQuery,
      response: { status: 200, schema: TokensDeleteResponse },
    },
    async (c, { query }) => {
      const { provider, deleted } = await tokens.deleteForProvider(org(c), ws(c), query.provider_id);
      return c.json({ message: `Deleted ${deleted} token(s) of OAuth provider '${provider.provider_id}'.`, deleted });
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v2/auth/tokens/exists',
      summary: 'Whether the workspace holds a token of a provider',
      tag,
      query: TokensExistsQuery,
      response: { status: 200, schema: TokensExistsResponse },
    },
    async (c, { query }) => {
      const exists = await tokens.exists(org(c), ws(c), query.provider_id, { userId: query.user_id, agentId: query.agent_id });
      return c.json({ exists, has_token: exists });
    },
  );
  route(
    ctx,
    { auth: 'api-key', method: 'delete', path: '/v2/auth/tokens/:token_id', summary: 'Forget one stored token', tag, response: { status: 204, schema: null } },
    async (c, { params }) => {
      await tokens.delete(org(c), ws(c), params.token_id);
      return c.body(null, 204);
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'patch',
      path: '/v2/auth/tokens/:token_id/metadata',
      summary: "Change a token's label or default mark",
      tag,
      body: OAuthTokenMetadataPatch,
      response: { status: 200, schema: OAuthTokenSummary },
    },
    async (c, { params, body }) => c.json(await tokens.patchMetadata(org(c), ws(c), params.token_id, body)),
  );

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v2/auth/authenticate',
      summary: 'Get a token, or start an authorization flow',
      tag,
      body: AuthenticateRequest,
      response: { status: 200, schema: AuthenticateResponse },
    },
    async (c, { body }) => c.json(await flows.authenticate({ organizationId: org(c), workspaceId: ws(c) }, body)),
  );

  oauthCallbackRoutes(ctx, flows, tag);

  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v2/auth/wait/:auth_id',
      summary: 'Wait until an authorization flow completes or fails',
      tag,
      query: WaitQuery,
      response: { status: 200, schema: WaitResponse },
    },
    async (c, { params, query }) => c.json(await flows.wait(ws(c), params.auth_id, query.timeout, c.req.raw.signal)),
  );
}
