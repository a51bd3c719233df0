import { GithubTokenExchange, GithubTokenExchanged } from '../../shared/schemas/github-trust.ts';
import type { GithubTokenExchanger } from '../domain/github-oidc/exchange.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

export const GITHUB_TOKEN_EXCHANGE_PATH = '/v1/auth/github-actions/token';

/** `POST /v1/auth/github-actions/token`: a GitHub Actions OIDC ID token for a short-lived workspace key. */
export function githubActionsTokenRoutes(ctx: RouteContext, exchanger: GithubTokenExchanger): void {
  route(
    ctx,
    {
      method: 'post',
      path: GITHUB_TOKEN_EXCHANGE_PATH,
      summary: 'Exchange a GitHub Actions OIDC ID token for a workspace-scoped API key of at most an hour',
      description:
        'No API key: the token is the credential. 401 when the token is not good (signature, issuer, audience, expiry, a jti used before); 403 when it is good but no trust entry allows it, or its event is pull_request_target or workflow_run. `workspace_id` is needed only when several workspaces trust the repository.',
      tag: 'github-trust',
      bodyReading: { unknownFields: 'refuse' },
      body: GithubTokenExchange,
      response: { status: 201, schema: GithubTokenExchanged },
      auth: 'actions-id-token',
      errors: [401, 403, 413, 415, 422, 503],
    },
    async (c, { body }) => {
      c.header('cache-control', 'no-store');
      return c.json(await exchanger.exchange(body), 201);
    },
  );
}
