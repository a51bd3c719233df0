import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { dockerBody, githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;
const TERMINAL = ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'CREATE_FAILED', 'SKIPPED', 'INTERRUPTED'];

describe('the revision pipeline', () => {
  let t: App | undefined;
  afterEach(() => t?.close());

  async function revisions(app: App, deploymentId: string) {
    return (await app.api.get(`/v2/deployments/${deploymentId}/revisions?limit=100`)).body.resources as Array<{
      id: string;
      status: string;
      status_message: string | null;
    }>;
  }

  it('runs one revision at a time; when it ends the newest queued one starts and older queued ones are SKIPPED', async () => {
    t = await inProcessApp({ stageMs: 150 });
    const app = t;
    const fx = await workspaceFixtures(app.api);
    const created = await app.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    const id = created.body.id;
    const first = created.body.latest_revision_id;
    const queuedIds: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      const patched = await app.api.patch(`/v2/deployments/${id}`, { secrets: [{ name: 'N', value: String(i) }] });
      queuedIds.push(patched.body.latest_revision_id);
    }
    const during = await revisions(app, id);
    const inProgress = during.filter((r) => !['QUEUED', ...TERMINAL].includes(r.status));
    expect(inProgress.map((r) => r.id)).toEqual([first]);
    expect(
      during
        .filter((r) => r.status === 'QUEUED')
        .map((r) => r.id)
        .sort(),
    ).toEqual([...queuedIds].sort());

    const newest = queuedIds[2]!;
    await eventually(async () => ((await revisions(app, id)).every((r) => TERMINAL.includes(r.status)) ? true : undefined));
    const after = new Map((await revisions(app, id)).map((r) => [r.id, r]));
    expect(after.get(first)!.status).toBe('DEPLOYED');
    expect(after.get(newest)!.status).toBe('DEPLOYED');
    for (const skipped of queuedIds.slice(0, 2)) {
      expect(after.get(skipped)!.status).toBe('SKIPPED');
      expect(after.get(skipped)!.status_message).toContain(newest);
    }
    const deployment = await app.api.get(`/v2/deployments/${id}`);
    expect(deployment.body).toMatchObject({ status: 'READY', active_revision_id: newest, latest_revision_id: newest });
  });

  it('interrupts a revision that has not ended, then starts the next; an ended one cannot be interrupted', async () => {
    t = await inProcessApp({ stageMs: 300 });
    const app = t;
    const fx = await workspaceFixtures(app.api);
    const created = await app.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId));
    const id = created.body.id;
    const first = created.body.latest_revision_id;
    const second = (await app.api.patch(`/v2/deployments/${id}`, { source_revision_config: { image_uri: 'img:2' } })).body.latest_revision_id;

    const interrupted = await app.api.post(`/v2/deployments/${id}/revisions/${first}/interrupt`);
    expect(interrupted.status).toBe(200);
    expect(interrupted.body).toMatchObject({ id: first, status: 'INTERRUPTED' });
    const logs = await app.api.get(`/v2/deployments/${id}/revisions/${first}/logs?type=deploy`);
    expect(logs.body.logs.some((l: { message: string }) => /Interrupted/.test(l.message))).toBe(true);

    await eventually(async () => ((await app.api.get(`/v2/deployments/${id}/revisions/${second}`)).body.status === 'DEPLOYED' ? true : undefined));
    // The interrupted revision stays interrupted: the sandbox's pending stage did not overwrite it.
    expect((await app.api.get(`/v2/deployments/${id}/revisions/${first}`)).body.status).toBe('INTERRUPTED');
    const again = await app.api.post(`/v2/deployments/${id}/revisions/${second}/interrupt`);
    expect(again.status).toBe(400);
    expect(again.body.detail).toMatch(/already ended with status DEPLOYED/);
    expect((await app.api.post(`/v2/deployments/${id}/revisions/${crypto.randomUUID()}/interrupt`)).status).toBe(404);
  });

  it('fails the deploy stage on request', async () => {
    t = await inProcessApp({ stageMs: 10 });
    const app = t;
    const fx = await workspaceFixtures(app.api);
    const created = await app.api.post(
      '/v2/deployments',
      dockerBody(uniqueName(), fx.listenerId, { secrets: [{ name: 'SANDBOX_FAIL_STAGE', value: 'deploy' }] }),
    );
    const revision = await eventually(async () => {
      const r = await app.api.get(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
      return TERMINAL.includes(r.body.status) ? r.body : undefined;
    });
    expect(revision.status).toBe('DEPLOY_FAILED');
    expect(revision.status_message).toMatch(/SANDBOX_FAIL_STAGE=deploy/);
  });

  it('pages logs with a cursor', async () => {
    t = await inProcessApp({ stageMs: 10 });
    const app = t;
    const fx = await workspaceFixtures(app.api);
    const created = await app.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    const base = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    await eventually(async () => ((await app.api.get(base)).body.status === 'DEPLOYED' ? true : undefined));
    const all = (await app.api.get(`${base}/logs?type=build&limit=100`)).body.logs;
    expect(all.length).toBeGreaterThanOrEqual(2);
    const page1 = await app.api.get(`${base}/logs?type=build&limit=1`);
    expect(page1.body.logs).toEqual([all[0]]);
    expect(page1.body.next_offset).not.toBeNull();
    const page2 = await app.api.get(`${base}/logs?type=build&limit=1&offset=${page1.body.next_offset}`);
    expect(page2.body.logs).toEqual([all[1]]);
  });
});
