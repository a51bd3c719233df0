import { z } from 'zod';
import { GithubIntegration, GithubIntegrationCreate, GithubRepository } from '../../shared/schemas/integration.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

export function integrationRoutes(ctx: RouteContext): void {
  const { integrations, installationRepos } = ctx.services;
  const tag = 'integrations';
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/integrations/github/install',
      summary: 'List the GitHub integrations of the workspace',
      tag,
      response: { status: 200, schema: z.array(GithubIntegration) },
    },
    async (c) => c.json(await integrations.list(c.get('principal').workspaceId)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v1/integrations/github',
      summary: 'Link a GitHub App installation to the workspace',
      tag,
      body: GithubIntegrationCreate,
      response: { status: 201, schema: GithubIntegration },
    },
    async (c, { body }) => c.json(await integrations.create(c.get('principal').workspaceId, body), 201),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/integrations/github/:integration_id/repos',
      summary: "Repositories the integration's GitHub App installation was granted, as GitHub's deliveries reported them",
      tag,
      response: { status: 200, schema: z.array(GithubRepository) },
    },
    async (c, { params }) => c.json(await installationRepos.list(c.get('principal').workspaceId, params.integration_id)),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: '/v1/integrations/github/:integration_id',
      summary: 'Unlink a GitHub integration',
      tag,
      response: { status: 204, schema: null },
    },
    async (c, { params }) => {
      await integrations.delete(c.get('principal').workspaceId, params.integration_id);
      return c.body(null, 204);
    },
  );
}
