import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** A deleted deployment's name is free again; the tracing project it left behind is adopted or deleted, never in the way. */
describe('names of deleted deployments', () => {
  let t: App;
  let listenerId: string;
  beforeAll(async () => {
    t = await inProcessApp();
    listenerId = (await workspaceFixtures(t.api)).listenerId;
  });
  afterAll(() => t.close());

  const gone = (id: string) => eventually(async () => ((await t.api.get(`/v2/deployments/${id}`)).status === 404 ? true : undefined), 10_000);
  const projectsNamed = async (name: string) =>
    (await t.api.get(`/v1/tracing-projects?name=${name}`)).body.resources as Array<{ id: string; deployment_id: string | null }>;

  it('delete → create with the same name → 201, and the new deployment takes over the tracing project the first left', async () => {
    const name = uniqueName('again');
    const first = await t.api.post('/v2/deployments', dockerBody(name, listenerId));
    expect(first.status).toBe(201);
    const [project] = await projectsNamed(name);
    expect(project!.deployment_id).toBe(first.body.id);

    expect((await t.api.delete(`/v2/deployments/${first.body.id}`)).status).toBe(204);
    await gone(first.body.id);
    // Deleted without delete_tracing_project (the hosted API's default): the project stays, held by nothing.
    expect(await projectsNamed(name)).toEqual([expect.objectContaining({ id: project!.id, deployment_id: null })]);

    const second = await t.api.post('/v2/deployments', dockerBody(name, listenerId));
    expect(second.status, JSON.stringify(second.body)).toBe(201);
    expect(await projectsNamed(name)).toEqual([expect.objectContaining({ id: project!.id, deployment_id: second.body.id })]);
    // Still one name in the workspace: a third deployment of that name is refused while the second lives.
    expect((await t.api.post('/v2/deployments', dockerBody(name, listenerId))).status).toBe(409);
  });

  it('with delete_tracing_project=true the project goes too, and the name is free', async () => {
    const name = uniqueName('with-project');
    const first = await t.api.post('/v2/deployments', dockerBody(name, listenerId));
    expect((await t.api.delete(`/v2/deployments/${first.body.id}?delete_tracing_project=true`)).status).toBe(204);
    await gone(first.body.id);
    expect(await projectsNamed(name)).toEqual([]);
    const second = await t.api.post('/v2/deployments', dockerBody(name, listenerId));
    expect(second.status).toBe(201);
    expect(await projectsNamed(name)).toEqual([expect.objectContaining({ deployment_id: second.body.id })]);
  });

  it('DELETE /v1/tracing-projects/{id}: 204 for a project nothing holds, 409 naming the deployment that holds one, 404 otherwise; tenant-scoped', async () => {
    const name = uniqueName('orphan');
    const first = await t.api.post('/v2/deployments', dockerBody(name, listenerId));
    const [project] = await projectsNamed(name);

    const held = await t.api.delete(`/v1/tracing-projects/${project!.id}`);
    expect(held.status).toBe(409);
    expect(held.body.detail).toContain(`belongs to deployment ${first.body.id}`);
    expect(held.body.detail).toContain('delete_tracing_project=true');
    expect(await projectsNamed(name)).toHaveLength(1);

    expect((await t.api.delete(`/v2/deployments/${first.body.id}`)).status).toBe(204);
    await gone(first.body.id);

    // Another workspace's key sees nothing and deletes nothing.
    const workspace = await t.api.post('/v1/workspaces', { name: `other-${uniqueName()}` });
    const key = await t.api.post('/v1/api-keys', { workspace_id: workspace.body.id, description: 'other workspace' });
    const other = t.client(key.body.key);
    expect((await other.delete(`/v1/tracing-projects/${project!.id}`)).status).toBe(404);
    expect(await projectsNamed(name)).toHaveLength(1);

    expect((await t.api.delete(`/v1/tracing-projects/${project!.id}`)).status).toBe(204);
    expect((await t.api.get(`/v1/tracing-projects/${project!.id}`)).status).toBe(404);
    expect((await t.api.delete(`/v1/tracing-projects/${project!.id}`)).status).toBe(404);
    const invalid = await t.api.delete('/v1/tracing-projects/not-a-uuid');
    expect([404, 422]).toContain(invalid.status);
    expect((await t.api.post('/v2/deployments', dockerBody(name, listenerId))).status).toBe(201);
  });
});
