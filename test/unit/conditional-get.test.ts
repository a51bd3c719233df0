import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

describe('conditional GET of a revision: If-None-Match forms and Prefer', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let path: string;
  let etag: string;

  beforeAll(async () => {
    // A k8s listener's revisions wait in AWAITING_DEPLOY: the revision does not change under the test.
    t = await inProcessApp();
    await workspaceFixtures(t.api);
    const k8s = await t.api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `k8s-${uniqueName()}`,
      compute_config: { k8s_license_secret: 'langgraph-license' },
    });
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName(), k8s.body.id));
    path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    await new Promise((r) => setTimeout(r, 20));
    etag = (await t.api.get(path)).headers.get('etag')!;
  });
  afterAll(() => t.close());

  it('matches the weak form, a list and *', async () => {
    for (const header of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
      expect((await t.api.get(path, { 'if-none-match': header })).status, header).toBe(304);
    }
    const stale = await t.api.get(path, { 'if-none-match': '"stale"' });
    expect(stale.status).toBe(200);
    expect(stale.headers.get('etag')).toBe(etag);
  });

  it('a Prefer it cannot understand is ignored: an ordinary conditional GET', async () => {
    for (const prefer of ['wait=abc', 'wait=-1', 'respond-async']) {
      const response = await t.api.get(path, { 'if-none-match': etag, prefer });
      expect(response.status, prefer).toBe(304);
    }
  });

  it('a held request ends with 200 and a new ETag when the revision changes', async () => {
    const held = t.api.get(path, { 'if-none-match': etag, prefer: 'wait=30' });
    await new Promise((r) => setTimeout(r, 50));
    const [deploymentId, revisionId] = [path.split('/')[3], path.split('/')[5]];
    expect((await t.api.post(`/v2/deployments/${deploymentId}/revisions/${revisionId}/interrupt`)).status).toBe(200);
    const answer = await held;
    expect(answer.status).toBe(200);
    expect(answer.body.status).toBe('INTERRUPTED');
    expect(answer.headers.get('etag')).not.toBe(etag);
  });
});
