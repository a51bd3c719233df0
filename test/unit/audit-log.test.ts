import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;
type Entry = { action: string; resource_type: string; resource_id: string | null; fields: string[]; outcome: string; status: number | null };

const SECRET = 'sk-audit-secret-value-never-stored';

/** Every entry the key may see, oldest first, walking the cursor pages (2 a page, so paging is exercised). */
async function allEntries(api: App['api'], filter = ''): Promise<Entry[]> {
  const entries: Entry[] = [];
  let cursor: string | null = null;
  do {
    const page: { status: number; body: { resources: Entry[]; next_cursor: string | null } } = await api.get(
      `/v1/audit-events?limit=2${filter}${cursor ? `&cursor=${cursor}` : ''}`,
    );
    expect(page.status).toBe(200);
    entries.push(...page.body.resources);
    cursor = page.body.next_cursor;
  } while (cursor);
  return entries.reverse();
}

describe('audit log (contract §17)', () => {
  let t: App;
  beforeAll(async () => {
    t = await inProcessApp({ stageMs: 5 });
  });
  afterAll(() => t.close());

  it('records create, patch, redeploy, delete, key creation and revocation; no secret value; invisible to another workspace', async () => {
    const { listenerId } = await workspaceFixtures(t.api);
    // The fixtures' own entries (the integration's create) are stamped up to this millisecond, and
    // `since` includes its bound: start from the next one, or a fast machine lists the fixture too.
    const fixturesDone = Date.now();
    while (Date.now() <= fixturesDone) await new Promise((resolve) => setTimeout(resolve, 1));
    const start = new Date().toISOString();
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName(), listenerId, { secrets: [{ name: 'OPENAI_API_KEY', value: SECRET }] }));
    expect(created.status).toBe(201);
    const deploymentId: string = created.body.id;
    await revisionReaches(t.api, deploymentId, created.body.latest_revision_id, ['DEPLOYED']);
    const patched = await t.api.patch(`/v2/deployments/${deploymentId}`, { secrets: [{ name: 'OPENAI_API_KEY', value: `${SECRET}-2` }] });
    expect(patched.status).toBe(200);
    await revisionReaches(t.api, deploymentId, patched.body.latest_revision_id, ['DEPLOYED']);
    expect((await t.api.post(`/v2/deployments/${deploymentId}/revisions/${created.body.latest_revision_id}/redeploy`)).status).toBe(200);
    expect((await t.api.delete(`/v2/deployments/${deploymentId}`)).status).toBe(204);
    const key = await t.api.post('/v1/api-keys', { workspace_id: null, description: 'audited' });
    expect(key.status).toBe(201);
    expect((await t.api.delete(`/v1/api-keys/${key.body.id}`)).status).toBe(204);
    // A refused change is recorded too, with its status.
    expect((await t.api.delete(`/v1/api-keys/${crypto.randomUUID()}`)).status).toBe(404);

    const entries = await allEntries(t.api, `&since=${encodeURIComponent(start)}`);
    const summary = entries.map((e) => [e.action, e.resource_type, e.outcome]);
    expect(summary).toEqual([
      ['create', 'deployment', 'succeeded'],
      ['update', 'deployment', 'succeeded'],
      ['redeploy', 'revision', 'succeeded'],
      ['delete', 'deployment', 'succeeded'],
      ['create', 'api_key', 'succeeded'],
      ['delete', 'api_key', 'succeeded'],
      ['delete', 'api_key', 'failed'],
    ]);
    expect(entries[0]).toMatchObject({ resource_id: deploymentId, actor_kind: 'api_key', actor_scope: 'organization', status: null });
    expect(entries[0]!.fields).toEqual(expect.arrayContaining(['name', 'source', 'secrets', 'source_config.listener_id']));
    expect(entries[1]).toMatchObject({ resource_id: deploymentId, fields: ['secrets'] });
    expect(entries[4]!.resource_id).toBe(key.body.id);
    expect(entries[6]).toMatchObject({ status: 404 });
    // Nothing a client can read of the log holds a secret value or a key.
    const everything = JSON.stringify(await allEntries(t.api));
    expect(everything).not.toContain(SECRET);
    expect(everything).not.toContain(key.body.key);
    // And the rows themselves do not either.
    const rows = await t.sql.all('SELECT * FROM audit_events');
    expect(JSON.stringify(rows)).not.toContain(SECRET);

    const byResource = await allEntries(t.api, `&resource_id=${deploymentId}`);
    expect(byResource.map((e) => e.action)).toEqual(['create', 'update', 'delete']);

    // A workspace key of another workspace sees none of it; the filters by actor find nothing either.
    const workspace = await t.api.post('/v1/workspaces', { name: uniqueName('ws') });
    const otherKey = await t.api.post('/v1/api-keys', { workspace_id: workspace.body.id, description: 'other' });
    const other = t.client(otherKey.body.key);
    const seen = await allEntries(other);
    expect(seen.filter((e) => e.resource_id === deploymentId)).toEqual([]);
    expect(seen.some((e) => e.resource_type === 'api_key')).toBe(false);
  });

  it('is append-only: no route changes or deletes an entry', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
      const response = await t.api.call(method, '/v1/audit-events', method === 'DELETE' ? undefined : {});
      expect([404, 405]).toContain(response.status);
      const one = await t.api.call(method, `/v1/audit-events/${crypto.randomUUID()}`, method === 'DELETE' ? undefined : {});
      expect([404, 405]).toContain(one.status);
    }
  });

  it('a change and its entry commit together: a create refused by the store writes its entry as failed, and no entry says it succeeded', async () => {
    const { listenerId } = await workspaceFixtures(t.api);
    const name = uniqueName();
    expect((await t.api.post('/v2/deployments', dockerBody(name, listenerId))).status).toBe(201);
    const before = (await t.sql.all<{ n: number }>("SELECT count(*) AS n FROM audit_events WHERE outcome = 'succeeded'"))[0]!.n;
    const duplicate = await t.api.post('/v2/deployments', dockerBody(name, listenerId));
    expect(duplicate.status).toBe(409);
    const after = (await t.sql.all<{ n: number }>("SELECT count(*) AS n FROM audit_events WHERE outcome = 'succeeded'"))[0]!.n;
    expect(Number(after)).toBe(Number(before));
    const [last] = (await t.api.get('/v1/audit-events?limit=1')).body.resources;
    expect(last).toMatchObject({ action: 'create', resource_type: 'deployment', outcome: 'failed', status: 409 });
  });

  it('console sign-ins are recorded through the exported recordSignIn, succeeded or refused', async () => {
    const principal = await t.services.auth.authenticate(t.apiKey, undefined);
    for (const succeeded of [true, false]) {
      await t.services.audit.recordSignIn({
        organizationId: principal.organizationId,
        workspaceId: principal.workspaceId,
        keyId: principal.keyId,
        organizationScoped: principal.organizationScoped,
        address: '192.0.2.1',
        userAgent: 'Mozilla/5.0',
        succeeded,
      });
    }
    const [refused, signedIn] = (await t.api.get(`/v1/audit-events?limit=2&actor=${principal.keyId}`)).body.resources;
    expect(signedIn).toMatchObject({ action: 'sign_in', resource_type: 'console_session', outcome: 'succeeded', address: '192.0.2.1' });
    expect(refused).toMatchObject({ action: 'sign_in', outcome: 'failed', status: 401 });
  });

  it('bad filters are 422 in the contract format; retention removes only old entries', async () => {
    const bad = await t.api.get('/v1/audit-events?since=yesterday');
    expect(bad.status).toBe(422);
    expect(bad.body.detail[0].loc).toEqual(['query', 'since']);
    expect((await t.api.get('/v1/audit-events?cursor=nonsense')).body.detail[0].loc).toEqual(['query', 'cursor']);
    const count = async () => Number((await t.sql.all<{ n: number }>('SELECT count(*) AS n FROM audit_events'))[0]!.n);
    const total = await count();
    expect(await t.services.audit.purge()).toBe(0);
    await t.sql.run("UPDATE audit_events SET created_at = '2000-01-01T00:00:00.000Z' WHERE seq = (SELECT min(seq) FROM audit_events)");
    expect(await t.services.audit.purge()).toBe(1);
    expect(await count()).toBe(total - 1);
  });
});
