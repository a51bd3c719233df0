import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

describe('workspace isolation', () => {
  let server: ServerProcess;
  let owner: Api;

  beforeAll(async () => {
    server = await startServerProcess();
    owner = apiClient(server.url, server.apiKey);
  });
  afterAll(async () => {
    await server?.kill();
  });

  it("another workspace's key sees 404 for the first workspace's resources, on every route", async () => {
    const fx = await workspaceFixtures(owner);
    const deployment = (await owner.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId))).body;
    const project = (await owner.get(`/v1/tracing-projects?name=${deployment.name}`)).body.resources[0];

    const workspace = await owner.post('/v1/workspaces', { name: `second-${uniqueName()}` });
    expect(workspace.status).toBe(201);
    const key = await owner.post('/v1/api-keys', { workspace_id: workspace.body.id, description: 'second workspace' });
    expect(key.status).toBe(201);
    expect(key.body.workspace_id).toBe(workspace.body.id);
    const other = apiClient(server.url, key.body.key);

    const d = `/v2/deployments/${deployment.id}`;
    const r = `${d}/revisions/${deployment.latest_revision_id}`;
    const checks: Array<[string, string, unknown?]> = [
      ['GET', d],
      ['PATCH', d, { secrets: [] }],
      ['DELETE', d],
      ['GET', `${d}/revisions`],
      ['GET', r],
      ['GET', `${r}/logs`],
      ['POST', `${r}/redeploy`, {}],
      ['POST', `${r}/interrupt`, {}],
      ['GET', `/v2/listeners/${fx.listenerId}`],
      ['PATCH', `/v2/listeners/${fx.listenerId}`, { compute_config: { k8s_namespaces: [] } }],
      ['DELETE', `/v2/listeners/${fx.listenerId}`],
      ['DELETE', `/v1/integrations/github/${fx.integrationId}`],
      ['GET', `/v1/tracing-projects/${project.id}`],
    ];
    for (const [method, path, body] of checks) {
      const response = await other.call(method, path, body);
      expect(response.status, `${method} ${path}`).toBe(404);
    }
    // Lists show nothing of the first workspace.
    expect((await other.get('/v2/deployments')).body.resources).toEqual([]);
    expect((await other.get('/v1/integrations/github/install')).body).toEqual([]);
    expect((await other.get(`/v1/tracing-projects?name=${deployment.name}`)).body.resources).toEqual([]);
    // The second workspace can create a deployment of the same name in its own space... but it has
    // no integration, so a github deployment there is refused as 400, not as a conflict.
    expect((await other.post('/v2/deployments', githubBody(deployment.name, fx.integrationId))).status).toBe(400);

    // A workspace-scoped key may not name another workspace; the owner's org key may.
    const defaultWs = (await owner.get('/v1/workspaces')).body.find((w: { name: string }) => w.name === 'default');
    expect((await other.get('/v2/deployments', { 'x-tenant-id': defaultWs.id })).status).toBe(403);
    expect((await owner.get('/v2/deployments', { 'x-tenant-id': workspace.body.id })).status).toBe(200);
    expect((await owner.get('/v2/deployments', { 'x-tenant-id': crypto.randomUUID() })).status).toBe(403);
    // A workspace-scoped key cannot mint keys or workspaces.
    expect((await other.post('/v1/api-keys', {})).status).toBe(403);

    // Everything is still there for the owner.
    expect((await owner.get(d)).status).toBe(200);
  });
});
