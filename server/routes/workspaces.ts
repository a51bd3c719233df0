import { z } from 'zod';
import { ApiKey, ApiKeyCreate, ApiKeyCreated } from '../../shared/schemas/api-key.ts';
import { Workspace, WorkspaceCreate } from '../../shared/schemas/workspace.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

/**
 * These routes are not the hosted API's, and a misspelt field here weakens access silently (an
 * `workspaceId` typo would make an organization-wide key): unknown fields are refused with 422,
 * unlike the hosted routes, which ignore them with a Warning (contract section 2).
 */
const STRICT = { unknownFields: 'refuse' } as const;

/** Workspaces and API keys of the caller's organization. */
export function workspaceRoutes(ctx: RouteContext): void {
  const { auth } = ctx.services;
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v1/workspaces',
      summary: 'Create a workspace',
      tag: 'workspaces',
      bodyReading: STRICT,
      body: WorkspaceCreate,
      response: { status: 201, schema: Workspace },
    },
    async (c, { body }) => c.json(await auth.createWorkspace(c.get('principal'), body.name), 201),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/workspaces',
      summary: 'List workspaces',
      tag: 'workspaces',
      response: { status: 200, schema: z.array(Workspace) },
    },
    async (c) => c.json(await auth.listWorkspaces(c.get('principal'))),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v1/api-keys',
      summary: 'Create an API key (its value is shown once)',
      tag: 'api-keys',
      bodyReading: STRICT,
      body: ApiKeyCreate,
      response: { status: 201, schema: ApiKeyCreated },
    },
    async (c, { body }) => {
      c.header('cache-control', 'no-store');
      return c.json(await auth.createApiKey(c.get('principal'), body), 201);
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/api-keys',
      summary: 'List API keys (without their values)',
      tag: 'api-keys',
      response: { status: 200, schema: z.array(ApiKey) },
    },
    async (c) => c.json(await auth.listApiKeys(c.get('principal'))),
  );
  route(
    ctx,
    { auth: 'api-key', method: 'delete', path: '/v1/api-keys/:key_id', summary: 'Revoke an API key', tag: 'api-keys', response: { status: 204, schema: null } },
    async (c, { params }) => {
      await auth.revokeApiKey(c.get('principal'), params.key_id);
      return c.body(null, 204);
    },
  );
}
