import { page } from '../../shared/schemas/common.ts';
import { Deployment, DeploymentCreate, DeploymentDeleteQuery, DeploymentListQuery, DeploymentPatch } from '../../shared/schemas/deployment.ts';
import { publicDeployment } from '../domain/deployments.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { pathId, readJson, readQuery } from '../http/validation.ts';

export function deploymentRoutes(ctx: RouteContext): void {
  const { deployments } = ctx.services;
  const tag = 'deployments';
  route(ctx, { method: 'post', path: '/v2/deployments', summary: 'Create a deployment (and its first revision and tracing project)', tag, body: DeploymentCreate, response: { status: 201, schema: Deployment } }, async (c) => {
    const body = await readJson(c, DeploymentCreate);
    return c.json(publicDeployment(await deployments.create(c.get('principal').workspaceId, body)), 201);
  });
  route(ctx, { method: 'get', path: '/v2/deployments', summary: 'List deployments, newest first', tag, query: DeploymentListQuery, response: { status: 200, schema: page(Deployment) } }, async (c) => {
    const query = readQuery(c, DeploymentListQuery);
    const result = await deployments.list(c.get('principal').workspaceId, query);
    return c.json({ resources: result.resources.map(publicDeployment), offset: result.offset });
  });
  route(ctx, { method: 'get', path: '/v2/deployments/:deployment_id', summary: 'Get a deployment', tag, response: { status: 200, schema: Deployment } }, async (c) =>
    c.json(publicDeployment(await deployments.get(c.get('principal').workspaceId, pathId(c, 'deployment_id')))),
  );
  route(ctx, { method: 'patch', path: '/v2/deployments/:deployment_id', summary: 'Update a deployment; some fields create a revision', tag, body: DeploymentPatch, response: { status: 200, schema: Deployment } }, async (c) => {
    const id = pathId(c, 'deployment_id');
    const body = await readJson(c, DeploymentPatch);
    const { deployment } = await deployments.patch(c.get('principal').workspaceId, id, body);
    return c.json(publicDeployment(deployment));
  });
  route(ctx, { method: 'delete', path: '/v2/deployments/:deployment_id', summary: 'Delete a deployment', tag, query: DeploymentDeleteQuery, response: { status: 204, schema: null } }, async (c) => {
    const id = pathId(c, 'deployment_id');
    const query = readQuery(c, DeploymentDeleteQuery);
    await deployments.delete(c.get('principal').workspaceId, id, query.delete_tracing_project);
    return c.body(null, 204);
  });
}
