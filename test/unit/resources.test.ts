import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../server/crypto/api-key.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

describe('listeners, integrations, workspaces, tracing projects', () => {
  let t: App;
  beforeAll(async () => {
    t = await inProcessApp();
  });
  afterAll(() => t.close());

  it('listeners: create, 409 on a duplicate compute_id, validation, patch, delete (409 while used)', async () => {
    const body = { compute_type: 'k8s', compute_id: `cluster-${uniqueName()}`, compute_config: { k8s_namespaces: ['a', 'b'] } };
    const created = await t.api.post('/v2/listeners', body);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      compute_type: 'k8s',
      compute_id: body.compute_id,
      compute_config: { k8s_namespaces: ['a', 'b'] },
      tenant_id: t.workspaceId,
    });
    expect((await t.api.post('/v2/listeners', body)).status).toBe(409);
    const badType = await t.api.post('/v2/listeners', { ...body, compute_type: 'ec2' });
    expect(badType.status).toBe(422);
    expect(badType.body.detail[0]).toMatchObject({ loc: ['body', 'compute_type'], type: 'enum' });
    const badNs = await t.api.post('/v2/listeners', { ...body, compute_id: 'x', compute_config: { k8s_namespaces: ['Bad_NS'] } });
    expect(badNs.body.detail[0].loc).toEqual(['body', 'compute_config', 'k8s_namespaces', 0]);

    const patched = await t.api.patch(`/v2/listeners/${created.body.id}`, { compute_config: { k8s_namespaces: ['c'] } });
    expect(patched.body.compute_config.k8s_namespaces).toEqual(['c']);
    expect((await t.api.get(`/v2/listeners/${created.body.id}`)).body.compute_config.k8s_namespaces).toEqual(['c']);

    const used = await t.api.post(
      '/v2/deployments',
      dockerBody(uniqueName(), created.body.id, { secrets: [{ name: 'LANGSMITH_API_KEY', value: 'lsv2-test' }] }),
    );
    expect(used.status).toBe(201);
    expect((await t.api.delete(`/v2/listeners/${created.body.id}`)).status).toBe(409);
    const free = await t.api.post('/v2/listeners', { compute_type: 'sandbox', compute_id: `free-${uniqueName()}` });
    expect((await t.api.delete(`/v2/listeners/${free.body.id}`)).status).toBe(204);
    expect((await t.api.get(`/v2/listeners/${free.body.id}`)).status).toBe(404);
  });

  it('integrations: list is a plain array; duplicates 409; delete 204 then 404', async () => {
    const installationId = 424242;
    const created = await t.api.post('/v1/integrations/github', { installation_id: installationId, name: 'acme' });
    expect(created.status).toBe(201);
    expect((await t.api.post('/v1/integrations/github', { installation_id: installationId, name: 'acme' })).status).toBe(409);
    expect((await t.api.post('/v1/integrations/github', { installation_id: -1, name: 'acme' })).status).toBe(422);
    const list = await t.api.get('/v1/integrations/github/install');
    expect(Array.isArray(list.body)).toBe(true);
    expect(list.body).toContainEqual({ id: created.body.id, installation_id: installationId, name: 'acme' });
    expect((await t.api.delete(`/v1/integrations/github/${created.body.id}`)).status).toBe(204);
    expect((await t.api.delete(`/v1/integrations/github/${created.body.id}`)).status).toBe(404);
  });

  it('an installation linked in one organization cannot be claimed by another (409)', async () => {
    // There is no API for organizations: add one and its key to the database directly.
    const otherKey = `other-org-${crypto.randomUUID()}`;
    const now = new Date().toISOString();
    const orgId = crypto.randomUUID();
    const workspaceId = crypto.randomUUID();
    await t.sql.prepare('INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)').run(orgId, `other-${orgId}`, now);
    await t.sql
      .prepare('INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, ?, 1, ?)')
      .run(workspaceId, orgId, 'default', now);
    await t.sql
      .prepare('INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at) VALUES (?, ?, NULL, ?, ?, ?)')
      .run(crypto.randomUUID(), orgId, hashApiKey(otherKey), 'other org', now);
    const other = t.client(otherKey);

    const installationId = 777_001;
    expect((await t.api.post('/v1/integrations/github', { installation_id: installationId, name: 'acme' })).status).toBe(201);
    const claim = await other.post('/v1/integrations/github', { installation_id: installationId, name: 'not-acme' });
    expect(claim.status).toBe(409);
    expect(claim.body.detail).toMatch(/another organization/);
    expect((await other.get('/v1/integrations/github/install')).body).toEqual([]);
    // Another workspace of the same organization may link it too.
    const sibling = await t.api.post('/v1/workspaces', { name: `sibling-${uniqueName()}` });
    const siblingLink = await t.api.post('/v1/integrations/github', { installation_id: installationId, name: 'acme' }, { 'x-tenant-id': sibling.body.id });
    expect(siblingLink.status).toBe(201);
    // And the other organization can link an installation of its own.
    expect((await other.post('/v1/integrations/github', { installation_id: 777_002, name: 'theirs' })).status).toBe(201);
  });

  it('workspaces: create 201, duplicate name 409, listed; tracing projects by id and name', async () => {
    const name = `ws-${uniqueName()}`;
    const created = await t.api.post('/v1/workspaces', { name });
    expect(created.status).toBe(201);
    expect((await t.api.post('/v1/workspaces', { name })).status).toBe(409);
    expect((await t.api.post('/v1/workspaces', {})).status).toBe(422);
    expect((await t.api.get('/v1/workspaces')).body.map((w: { name: string }) => w.name)).toEqual(expect.arrayContaining(['default', name]));

    const fx = await workspaceFixtures(t.api);
    const deployment = await t.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId));
    const projects = await t.api.get(`/v1/tracing-projects?name=${deployment.body.name}`);
    const project = projects.body.resources[0];
    expect(project).toMatchObject({ name: deployment.body.name, deployment_id: deployment.body.id, tenant_id: t.workspaceId });
    expect((await t.api.get(`/v1/tracing-projects/${project.id}`)).body).toEqual(project);
    expect((await t.api.get(`/v1/tracing-projects/${crypto.randomUUID()}`)).status).toBe(404);
  });
});
