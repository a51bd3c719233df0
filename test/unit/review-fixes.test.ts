import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** Defects found by reviewing the merged branches, each shown by the request that exposed it. */
describe('review fixes', () => {
  let t: App;
  beforeAll(async () => {
    t = await inProcessApp();
  });
  afterAll(() => t?.close());

  it('a misspelt field on POST /v1/api-keys is refused, not ignored into an organization-wide key', async () => {
    const before = (await t.api.get('/v1/api-keys')).body.length;
    const typo = await t.api.post('/v1/api-keys', { workspaceId: t.workspaceId, description: 'ci' });
    expect(typo.status).toBe(422);
    expect(typo.body.detail[0]).toMatchObject({ loc: ['body', 'workspaceId'], type: 'extra_forbidden' });
    expect((await t.api.get('/v1/api-keys')).body.length).toBe(before);

    const created = await t.api.post('/v1/api-keys', { workspace_id: t.workspaceId, description: 'ci' });
    expect(created.status).toBe(201);
    expect(created.body.workspace_id).toBe(t.workspaceId);
    // Shown once: no cache may keep it.
    expect(created.headers.get('cache-control')).toBe('no-store');
  });

  it('a misspelt field on POST /v1/workspaces or PATCH /v1/workspaces/{id} is refused', async () => {
    expect((await t.api.post('/v1/workspaces', { name: 'w-typo', defaultListenerId: null })).status).toBe(422);
    expect((await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { defaultListenerID: null })).status).toBe(422);
  });

  it('agent tokens are only for agent-served listeners: the sandbox carries its own listeners, and an agent there would race it for the work and its secrets', async () => {
    const { listenerId: sandbox } = await workspaceFixtures(t.api);
    const refused = await t.api.post(`/v2/listeners/${sandbox}/tokens`, {});
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/sandbox listener/);

    const local = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: `review-${Date.now()}` });
    const token = await t.api.post(`/v2/listeners/${local.body.id}/tokens`, {});
    expect(token.status).toBe(201);
    expect(token.headers.get('cache-control')).toBe('no-store');
  });
});
