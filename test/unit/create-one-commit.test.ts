import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { dockerBody, githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** Counts the calls of the store's write methods (each is one write transaction) from now on. */
function countWrites(t: App): Map<string, number> {
  const counts = new Map<string, number>();
  const store = t.store as unknown as Record<string, (...args: unknown[]) => unknown>;
  for (const name of ['createDeployment', 'transitionRevision', 'appendLogs', 'startNextRevision', 'updateDeployment']) {
    const original = store[name]!.bind(t.store);
    store[name] = (...args: unknown[]) => {
      counts.set(name, (counts.get(name) ?? 0) + 1);
      return original(...args);
    };
  }
  return counts;
}

describe('a create is one write transaction', () => {
  let t: App | undefined;
  afterEach(() => t?.close());

  it("the sandbox's first step (BUILDING and its log line) is stored with the deployment; the later stages run on the sandbox's schedule", async () => {
    t = await inProcessApp({ stageMs: 200 });
    const fx = await workspaceFixtures(t.api);
    const writes = countWrites(t);
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    expect(created.status).toBe(201);
    const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    // Before the data plane has had a turn of the event loop: the step is already stored.
    const [revision, logs] = await Promise.all([t.api.get(path), t.api.get(`${path}/logs?type=build`)]);
    expect(revision.body.status).toBe('BUILDING');
    expect(logs.body.logs.map((l: { message: string }) => l.message)).toEqual([
      expect.stringMatching(/^sandbox: simulated build of .*; nothing is cloned or built$/),
    ]);
    await new Promise((r) => setTimeout(r, 100));
    expect(Object.fromEntries(writes)).toEqual({ createDeployment: 1 });

    await eventually(async () => ((await t!.api.get(path)).body.status === 'DEPLOYED' ? true : undefined));
    const build = (await t.api.get(`${path}/logs?type=build`)).body.logs.map((l: { message: string }) => l.message);
    const deploy = (await t.api.get(`${path}/logs?type=deploy`)).body.logs.map((l: { message: string }) => l.message);
    expect(build).toEqual([expect.stringMatching(/^sandbox: simulated build of /), 'sandbox: simulated build finished']);
    expect(deploy).toEqual([expect.stringMatching(/^sandbox: simulated deploy of /), 'sandbox: simulated deploy finished; revision is live in the sandbox']);
    // AWAITING_BUILD → BUILDING was stored with the create; the data plane wrote the three later steps.
    expect(writes.get('transitionRevision')).toBe(3);
  });

  it('a deployment a listener agent serves is created in its first stage and waits there for a claim', async () => {
    t = await inProcessApp({ stageMs: 50 });
    const k8s = await t.api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `k8s-${uniqueName()}`,
      compute_config: { k8s_license_secret: 'langgraph-license' },
    });
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName(), k8s.body.id));
    const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    await new Promise((r) => setTimeout(r, 150));
    expect((await t.api.get(path)).body.status).toBe('AWAITING_DEPLOY');
    expect((await t.api.get(`${path}/logs?type=deploy`)).body.logs).toEqual([]);
  });

  it('a workspace whose default listener is a k8s agent: its github deployment is not stepped by the sandbox', async () => {
    t = await inProcessApp({ stageMs: 50 });
    const fx = await workspaceFixtures(t.api);
    const k8s = await t.api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `k8s-${uniqueName()}`,
      compute_config: { k8s_license_secret: 'langgraph-license' },
    });
    expect((await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { default_listener_id: k8s.body.id })).status).toBe(200);
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName(), fx.integrationId));
    const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    await new Promise((r) => setTimeout(r, 150));
    expect((await t.api.get(path)).body.status).toBe('AWAITING_BUILD');
  });
});
