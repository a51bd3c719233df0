import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * The live pages' change streams, in process (SQLite, and PostgreSQL in the `postgres` project):
 * each kind of page hears of the changes it shows, and a stream never tells of another workspace.
 */
describe('console live streams', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let cookie: string;

  beforeAll(async () => {
    // Sandbox stages of 300 ms: a revision is still building while its page is opened.
    t = await inProcessApp({ stageMs: 300, env: { CONSOLE_LIVE_INTERVAL_MS: '100' } });
    cookie = await signIn(t.apiKey);
  });
  afterAll(async () => {
    await t?.close();
  });

  async function signIn(key: string): Promise<string> {
    const form = await t.app.request('/console/sign-in');
    const signInCookie = form.headers.getSetCookie()[0]!.split(';')[0]!;
    const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())![1]!;
    const answer = await t.app.request('/console/sign-in', {
      method: 'POST',
      headers: { cookie: signInCookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ key, csrf }),
    });
    return answer.headers
      .getSetCookie()
      .find((line) => line.startsWith('console_session='))!
      .split(';')[0]!;
  }

  /** The live address a page carries, with the fingerprint it was rendered at. */
  async function liveOf(path: string, as = cookie): Promise<string> {
    const page = await (await t.app.request(path, { headers: { cookie: as } })).text();
    return /data-live="([^"]+)"/.exec(page)![1]!.replaceAll('&amp;', '&');
  }

  /** Opens a stream; `changed()` resolves at its first "changed" event, `close()` ends it. */
  async function open(live: string, as = cookie) {
    const response = await t.app.request(live, { headers: { cookie: as } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/text\/event-stream/);
    const reader = response.body!.getReader();
    let text = '';
    let seen = false;
    const changed = (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        text += new TextDecoder().decode(value);
        if (text.includes('event: changed')) return (seen = true);
      }
    })();
    return { changed, seen: () => seen, close: () => reader.cancel() };
  }

  it('tells a deployment page of a PATCH, a revision page of new log lines, and the list of a new deployment', async () => {
    const fx = await workspaceFixtures(t.api);
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName('live'), fx.integrationId));
    const id = created.body.id;
    await revisionReaches(t.api, id, created.body.latest_revision_id, ['DEPLOYED']);

    const deploymentPage = await open(await liveOf(`/console/deployments/${id}`));
    const listPage = await open(await liveOf('/console'));
    const patched = await t.api.patch(`/v2/deployments/${id}`, { source_revision_config: { repo_ref: 'next' } });
    expect(await deploymentPage.changed).toBe(true);
    deploymentPage.close();
    // The shown deployment's latest revision changed: the list page hears of it too.
    expect(await listPage.changed).toBe(true);
    listPage.close();

    // A revision page opened while its revision is building hears of its log lines and status.
    const revisionPage = await open(await liveOf(`/console/deployments/${id}/revisions/${patched.body.latest_revision_id}`));
    await revisionReaches(t.api, id, patched.body.latest_revision_id, ['DEPLOYED']);
    expect(await revisionPage.changed).toBe(true);
    revisionPage.close();

    const emptyList = await open(await liveOf('/console?name_contains=nothing-matches-this'));
    await t.api.post('/v2/deployments', githubBody(uniqueName('another'), fx.integrationId));
    expect(await emptyList.changed).toBe(true);
    emptyList.close();
  });

  it("never tells a page of another workspace's changes", async () => {
    const fx = await workspaceFixtures(t.api);
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName('theirs'), fx.integrationId));
    const id = created.body.id;
    await revisionReaches(t.api, id, created.body.latest_revision_id, ['DEPLOYED']);
    const workspace = await t.api.post('/v1/workspaces', { name: `live-other-${Date.now()}` });
    const otherKey = (await t.api.post('/v1/api-keys', { workspace_id: workspace.body.id })).body.key;
    const other = await signIn(otherKey);

    // Its ids named in a stream's address: the stream opens (it reveals nothing) and stays silent.
    const watching = await open(`/console/live?deployment_id=${id}&since=`, other);
    const watchingList = await open(`/console/live?deployment_ids=${id}&since=${encodeURIComponent('0')}`, other);
    const mine = await open(await liveOf(`/console/deployments/${id}`));
    await t.api.patch(`/v2/deployments/${id}`, { source_revision_config: { repo_ref: 'secret-change' } });
    expect(await mine.changed).toBe(true);
    mine.close();
    // Several ticks later, the other workspace's streams have still said nothing.
    const later = await open(await liveOf(`/console/deployments/${id}`));
    await t.api.patch(`/v2/deployments/${id}`, { source_revision_config: { repo_ref: 'another-change' } });
    expect(await later.changed).toBe(true);
    later.close();
    expect(watching.seen()).toBe(false);
    expect(watchingList.seen()).toBe(false);
    watching.close();
    watchingList.close();
  });

  it('refuses malformed stream addresses with a 404, and a stream without a session', async () => {
    for (const query of ['deployment_id=nope', `revision_id=${crypto.randomUUID()}`, `deployment_ids=${'x,'.repeat(5)}`]) {
      expect((await t.app.request(`/console/live?${query}`, { headers: { cookie } })).status, query).toBe(404);
    }
    const ids = Array.from({ length: 21 }, () => crypto.randomUUID()).join(',');
    expect((await t.app.request(`/console/live?deployment_ids=${ids}`, { headers: { cookie } })).status).toBe(404);
    expect((await t.app.request('/console/live')).status).toBe(303);
  });
});
