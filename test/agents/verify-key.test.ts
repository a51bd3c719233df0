import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** `POST /v2/agent/verify-key` in process: what an agent's proxy asks before it forwards a request. */
describe('POST /v2/agent/verify-key', () => {
  let t: App;
  let token: string;
  let deploymentId: string;
  let otherWorkspace: string;
  let otherToken: string;

  const verify = (bearer: string | null, body: unknown) =>
    Promise.resolve(
      t.app.request('/v2/agent/verify-key', {
        method: 'POST',
        headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }),
    ).then(async (response) => ({ status: response.status, body: (await response.json()) as any }));

  beforeAll(async () => {
    t = await inProcessApp();
    const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: 'machine-a' });
    token = (await t.api.post(`/v2/listeners/${listener.body.id}/tokens`)).body.token;
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('keys'), listener.body.id));
    expect(created.status).toBe(201);
    deploymentId = created.body.id;
    otherWorkspace = (await t.api.post('/v1/workspaces', { name: `other-${crypto.randomUUID().slice(0, 6)}` })).body.id;
    const inOther = t.client(t.apiKey, { 'x-tenant-id': otherWorkspace });
    const otherListener = await inOther.post('/v2/listeners', { compute_type: 'local', compute_id: 'machine-b' });
    otherToken = (await inOther.post(`/v2/listeners/${otherListener.body.id}/tokens`)).body.token;
  });
  afterAll(() => t.close());

  it('allows a key of the deployment’s workspace or organization; refuses another workspace’s key, an unknown and a revoked one', async () => {
    const workspaceId = (await t.api.get(`/v2/deployments/${deploymentId}`)).body.tenant_id ?? (await t.api.get('/v1/workspaces')).body[0].id;
    expect(await verify(token, { key: t.apiKey, deployment_id: deploymentId })).toEqual({ status: 200, body: { allowed: true } });
    const own = await t.api.post('/v1/api-keys', { workspace_id: workspaceId });
    expect((await verify(token, { key: own.body.key, deployment_id: deploymentId })).body).toEqual({ allowed: true });
    const other = await t.api.post('/v1/api-keys', { workspace_id: otherWorkspace });
    expect((await verify(token, { key: other.body.key, deployment_id: deploymentId })).body).toEqual({ allowed: false, reason: 'other_workspace' });
    expect((await verify(token, { key: 'nobody-has-this-key', deployment_id: deploymentId })).body).toEqual({ allowed: false, reason: 'invalid' });
    expect((await t.api.delete(`/v1/api-keys/${own.body.id}`)).status).toBe(204);
    expect((await verify(token, { key: own.body.key, deployment_id: deploymentId })).body).toEqual({ allowed: false, reason: 'invalid' });
  });

  it('takes only an agent token, answers 404 for a deployment of another workspace, and 422 for a bad body', async () => {
    expect((await verify(null, { key: t.apiKey, deployment_id: deploymentId })).status).toBe(401);
    expect((await verify(t.apiKey, { key: t.apiKey, deployment_id: deploymentId })).status).toBe(401);
    // Another workspace's agent learns nothing of the deployment, not even that it exists.
    const foreign = await verify(otherToken, { key: t.apiKey, deployment_id: deploymentId });
    expect(foreign).toEqual({ status: 404, body: { detail: `Deployment ID ${deploymentId} not found.` } });
    expect((await verify(token, { key: t.apiKey, deployment_id: 'not-a-uuid' })).status).toBe(422);
    expect((await verify(token, { deployment_id: deploymentId })).status).toBe(422);
  });
});
