import { z } from 'zod';
import { GithubTrust, GithubTrustCreate } from '../../shared/schemas/github-trust.ts';
import type { GithubTrustEntries } from '../domain/github-oidc/trust-entries.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

/** `…/workspaces/{id}/github-trust`: which repositories may deploy here with their GitHub Actions token. */
export function githubTrustRoutes(ctx: RouteContext, entries: GithubTrustEntries): void {
  const path = '/v1/workspaces/:workspace_id/github-trust';
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path,
      summary: 'Trust a GitHub repository (by numeric id) to exchange its Actions ID tokens for keys of this workspace',
      description:
        "Every field the entry sets must equal the token's claim exactly. Unknown fields are refused (a misspelt field would widen the trust silently).",
      tag: 'github-trust',
      bodyReading: { unknownFields: 'refuse' },
      body: GithubTrustCreate,
      response: { status: 201, schema: GithubTrust },
    },
    async (c, { params, body }) => {
      const workspaceId = params.workspace_id;
      return c.json(await entries.create(c.get('principal'), workspaceId, body), 201);
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path,
      summary: "List the workspace's GitHub trust entries",
      tag: 'github-trust',
      response: { status: 200, schema: z.array(GithubTrust) },
    },
    async (c, { params }) => c.json(await entries.list(c.get('principal'), params.workspace_id)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: `${path}/:trust_id`,
      summary: 'Remove a GitHub trust entry (keys already minted stay until they expire or are revoked)',
      tag: 'github-trust',
      response: { status: 204, schema: null },
    },
    async (c, { params }) => {
      await entries.remove(c.get('principal'), params.workspace_id, params.trust_id);
      return c.body(null, 204);
    },
  );
}
