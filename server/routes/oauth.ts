import { z } from 'zod';
import { page, PageQuery } from '../../shared/schemas/common.ts';
import { AuthenticateRequest, AuthenticateResponse, OAuthProvider, OAuthProviderCreate, OAuthProviderPatch, WaitQuery, WaitResponse } from '../../shared/schemas/oauth.ts';
import { requireOrganizationScope } from '../domain/auth.ts';
import type { OAuth } from '../domain/oauth/oauth.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { pathId, readJson, readQuery } from '../http/validation.ts';
import { CALLBACK_PAGE_HEADERS, callbackPage } from './oauth-page.ts';

/** The path the providers redirect back to; it takes no API key (the `state` authenticates it). */
export const OAUTH_CALLBACK_PATH = '/v2/auth/callback';

/** OAuth helper routes: providers of the key's organization, authenticate, callback, wait. */
export function oauthRoutes(ctx: RouteContext, oauth: OAuth): void {
  const { providers, flows } = oauth;
  const tag = 'oauth';
  const base = '/v2/auth/providers';
  route(ctx, { method: 'post', path: base, summary: 'Create an OAuth provider', tag, body: OAuthProviderCreate, response: { status: 201, schema: OAuthProvider } }, async (c) => {
    requireOrganizationScope(c.get('principal'), 'create OAuth providers');
    const body = await readJson(c, OAuthProviderCreate);
    return c.json(await providers.create(c.get('principal').organizationId, body), 201);
  });
  route(ctx, { method: 'get', path: base, summary: 'List OAuth providers', tag, query: PageQuery, response: { status: 200, schema: page(OAuthProvider) } }, async (c) => {
    const query = readQuery(c, PageQuery);
    return c.json(await providers.list(c.get('principal').organizationId, query.limit, query.offset));
  });
  route(ctx, { method: 'get', path: `${base}/:id`, summary: 'Get an OAuth provider', tag, response: { status: 200, schema: OAuthProvider } }, async (c) =>
    c.json(await providers.get(c.get('principal').organizationId, pathId(c, 'id'))),
  );
  route(ctx, { method: 'patch', path: `${base}/:id`, summary: 'Update an OAuth provider (a new client secret may be set)', tag, body: OAuthProviderPatch, response: { status: 200, schema: OAuthProvider } }, async (c) => {
    requireOrganizationScope(c.get('principal'), 'change OAuth providers');
    const id = pathId(c, 'id');
    const body = await readJson(c, OAuthProviderPatch);
    return c.json(await providers.patch(c.get('principal').organizationId, id, body));
  });
  route(ctx, { method: 'delete', path: `${base}/:id`, summary: 'Delete an OAuth provider with its tokens', tag, response: { status: 204, schema: null } }, async (c) => {
    requireOrganizationScope(c.get('principal'), 'delete OAuth providers');
    await providers.delete(c.get('principal').organizationId, pathId(c, 'id'));
    return c.body(null, 204);
  });

  route(ctx, { method: 'post', path: '/v2/auth/authenticate', summary: 'Get a token, or start an authorization flow', tag, body: AuthenticateRequest, response: { status: 200, schema: AuthenticateResponse } }, async (c) => {
    const body = await readJson(c, AuthenticateRequest);
    return c.json(await flows.authenticate(c.get('principal').organizationId, body));
  });

  route(
    ctx,
    {
      method: 'get',
      path: OAUTH_CALLBACK_PATH,
      summary: 'Where the provider sends the user back (HTML page; state-checked, no API key)',
      tag,
      auth: false,
      query: z.object({ state: z.string().optional(), code: z.string().optional(), error: z.string().optional(), error_description: z.string().optional() }),
      response: { status: 200, schema: z.string(), contentType: 'text/html', description: 'HTML page: authorization complete' },
      responses: [
        { status: 400, schema: z.string(), contentType: 'text/html', description: 'HTML page: unknown, used or expired state, or the user denied consent' },
        { status: 502, schema: z.string(), contentType: 'text/html', description: 'HTML page: the provider\'s token endpoint failed' },
      ],
      // Answers are pages for a browser, never {"detail"} JSON.
      errors: [],
    },
    async (c) => {
      const outcome = await flows.callback({
        state: c.req.query('state'),
        code: c.req.query('code'),
        error: c.req.query('error'),
        error_description: c.req.query('error_description'),
      });
      switch (outcome.kind) {
        case 'completed':
          return c.html(callbackPage('Authorization complete', 'You can close this window.'), 200, CALLBACK_PAGE_HEADERS);
        case 'invalid_state':
          return c.html(callbackPage('Authorization failed', outcome.message), 400, CALLBACK_PAGE_HEADERS);
        case 'failed': {
          const detail = outcome.description ? `${outcome.error}: ${outcome.description}` : outcome.error;
          return c.html(callbackPage('Authorization failed', `No token was obtained (${detail}). You can close this window.`), outcome.providerUnavailable ? 502 : 400, CALLBACK_PAGE_HEADERS);
        }
      }
    },
  );

  route(ctx, { method: 'get', path: '/v2/auth/wait/:auth_id', summary: 'Wait until an authorization flow completes or fails', tag, query: WaitQuery, response: { status: 200, schema: WaitResponse } }, async (c) => {
    const authId = pathId(c, 'auth_id');
    const query = readQuery(c, WaitQuery);
    return c.json(await flows.wait(c.get('principal').organizationId, authId, query.timeout, c.req.raw.signal));
  });
}
