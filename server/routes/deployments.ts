import { z } from 'zod';
import { page } from '../../shared/schemas/common.ts';
import {
  BulkDeleteQuery,
  BulkDeleteResult,
  Deployment,
  DeploymentCreate,
  DeploymentDeleteQuery,
  DeploymentListQuery,
  DeploymentPatch,
  PushToken,
  UploadUrl,
} from '../../shared/schemas/deployment.ts';
import { publicDeployment } from '../domain/deployments.ts';
import { pushToken } from '../domain/push-token.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { validate } from '../http/validation.ts';

/** Unknown fields are ignored with a `Warning` header (contract §2). */

export function deploymentRoutes(ctx: RouteContext): void {
  const { deployments, uploads, registry } = ctx.services;
  const tag = 'deployments';
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v2/deployments',
      summary: 'Create a deployment (and its first revision and tracing project)',
      tag,
      body: DeploymentCreate,
      response: { status: 201, schema: Deployment },
    },
    async (c, { body }) => c.json(publicDeployment(await deployments.create(c.get('principal').workspaceId, body)), 201),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v2/deployments',
      summary: 'List deployments, newest first',
      tag,
      query: DeploymentListQuery,
      response: { status: 200, schema: page(Deployment) },
    },
    async (c, { query }) => {
      const result = await deployments.list(c.get('principal').workspaceId, query);
      return c.json({ resources: result.resources.map(publicDeployment), offset: result.offset });
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: '/v2/deployments',
      summary: 'Delete several deployments (deployment_ids repeated or comma-separated, at most 100): 200 when all are deleted, 207 when some are not',
      tag,
      query: z.object({ deployment_ids: z.string(), delete_tracing_project: z.enum(['true', 'false']).optional() }),
      ownInput: 'deployment_ids may be repeated (?deployment_ids=a&deployment_ids=b), which the one-value query object cannot carry',
      response: { status: 200, schema: BulkDeleteResult },
    },
    async (c) => {
      const ids = (c.req.queries('deployment_ids') ?? []).flatMap((value) => value.split(',')).filter((id) => id.length > 0);
      const query = validate(BulkDeleteQuery, { deployment_ids: ids, delete_tracing_project: c.req.query('delete_tracing_project') }, 'query');
      const result = await deployments.deleteMany(c.get('principal').workspaceId, query.deployment_ids, query.delete_tracing_project);
      return c.json(result, result.failed.length === 0 ? 200 : 207);
    },
  );
  route(
    ctx,
    { auth: 'api-key', method: 'get', path: '/v2/deployments/:deployment_id', summary: 'Get a deployment', tag, response: { status: 200, schema: Deployment } },
    async (c, { params }) => c.json(publicDeployment(await deployments.get(c.get('principal').workspaceId, params.deployment_id))),
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'patch',
      path: '/v2/deployments/:deployment_id',
      summary: 'Update a deployment; some fields create a revision',
      tag,
      body: DeploymentPatch,
      response: { status: 200, schema: Deployment },
    },
    async (c, { params, body }) => {
      const { deployment } = await deployments.patch(c.get('principal').workspaceId, params.deployment_id, body);
      return c.json(publicDeployment(deployment));
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'delete',
      path: '/v2/deployments/:deployment_id',
      summary: 'Delete a deployment',
      tag,
      query: DeploymentDeleteQuery,
      response: { status: 204, schema: null },
    },
    async (c, { params, query }) => {
      await deployments.delete(c.get('principal').workspaceId, params.deployment_id, query.delete_tracing_project, query.force);
      return c.body(null, 204);
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v2/deployments/:deployment_id/upload-url',
      summary:
        'A signed URL (15 minutes, one use) to PUT a gzip source tarball of an internal_source deployment to, and the object_path to PATCH as source_tarball_path',
      tag,
      response: { status: 200, schema: UploadUrl },
    },
    async (c, { params }) => {
      const tenantId = c.get('principal').workspaceId;
      const deployment = await deployments.get(tenantId, params.deployment_id);
      deployments.refuseUnlessSource(deployment, 'internal_source', 'upload-url');
      return c.json(await uploads.issue(tenantId, deployment.id));
    },
  );
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'post',
      path: '/v2/deployments/:deployment_id/push-token',
      summary: 'A token to push the image of an internal_docker deployment to the configured registry (400 when no registry is configured)',
      tag,
      response: { status: 200, schema: PushToken },
    },
    async (c, { params }) => {
      const deployment = await deployments.get(c.get('principal').workspaceId, params.deployment_id);
      deployments.refuseUnlessSource(deployment, 'internal_docker', 'push-token');
      c.header('cache-control', 'no-store');
      return c.json(pushToken(registry));
    },
  );
}
