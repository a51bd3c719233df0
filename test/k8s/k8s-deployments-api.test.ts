import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * What the API refuses of a deployment on a `k8s` listener before any agent sees it (contract §2,
 * §14): invalid ResourceSpec combinations with 422 naming the field, a namespace outside the
 * listener's list with 400; in each case nothing is created and no work reaches the listener.
 */
describe('deployments on a k8s listener: refused at the API', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let listenerId: string;

  beforeAll(async () => {
    t = await inProcessApp();
    const listener = await t.api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `k8s-${crypto.randomUUID().slice(0, 8)}`,
      compute_config: { k8s_namespaces: ['team-a'] },
    });
    expect(listener.status).toBe(201);
    listenerId = listener.body.id;
  });
  afterAll(() => t.close());

  const body = (resourceSpec: Record<string, unknown>, namespace = 'team-a') => ({
    name: uniqueName('k8s-api'),
    source: 'external_docker',
    source_config: { listener_id: listenerId, listener_config: { k8s_namespace: namespace }, resource_spec: resourceSpec },
    source_revision_config: { image_uri: 'registry.example.com/acme/bot:1' },
    secrets: [{ name: 'LANGSMITH_API_KEY', value: 'lsv2-test' }],
  });
  type Work = { deployment: { id: string; k8s_namespace: string | null }; revision: { resource_spec: unknown } };
  /** Claims, as an agent of the listener would, every piece of work it is offered now. */
  const claimAll = async (agentId: string): Promise<Work[]> => {
    const token = await t.api.post(`/v2/listeners/${listenerId}/tokens`);
    const claimed: Work[] = [];
    for (;;) {
      const claim = await t.app.request(`/v2/listeners/${listenerId}/agent/claim`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token.body.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ agent_id: agentId, wait_seconds: 0 }),
      });
      const { work } = (await claim.json()) as { work: Work | null };
      if (!work) return claimed;
      claimed.push(work);
    }
  };
  const count = async () => (await t.api.get('/v2/deployments?limit=100')).body.resources.length as number;

  it('a volume_mounts name that matches no volume: 422 whose loc names the mount', async () => {
    const before = await count();
    const response = await t.api.post(
      '/v2/deployments',
      body({
        volumes: [{ name: 'cache', emptyDir: {} }],
        volume_mounts: [
          { name: 'cache', mountPath: '/c' },
          { name: 'data', mountPath: '/d' },
        ],
      }),
    );
    expect(response.status).toBe(422);
    expect(response.body.detail).toContainEqual(
      expect.objectContaining({
        loc: ['body', 'source_config', 'resource_spec', 'volume_mounts', 1, 'name'],
        msg: expect.stringContaining("'data' does not name a volume"),
      }),
    );
    expect(await count()).toBe(before);
  });

  it("a sidecar's volumeMounts naming no volume: 422 at that mount", async () => {
    const response = await t.api.post('/v2/deployments', body({ sidecars: [{ name: 'side', image: 'x', volumeMounts: [{ name: 'nope', mountPath: '/n' }] }] }));
    expect(response.status).toBe(422);
    expect(response.body.detail).toContainEqual(
      expect.objectContaining({ loc: ['body', 'source_config', 'resource_spec', 'sidecars', 0, 'volumeMounts', 0, 'name'] }),
    );
  });

  it('an EnvVar with both value and valueFrom: 422 naming valueFrom of that variable', async () => {
    const before = await count();
    const response = await t.api.post(
      '/v2/deployments',
      body({ init_containers: [{ name: 'init', image: 'x', env: [{ name: 'TOKEN', value: 'abc', valueFrom: { secretKeyRef: { name: 's', key: 'k' } } }] }] }),
    );
    expect(response.status).toBe(422);
    expect(response.body.detail).toContainEqual(
      expect.objectContaining({
        loc: ['body', 'source_config', 'resource_spec', 'init_containers', 0, 'env', 0, 'valueFrom'],
        msg: expect.stringContaining("env var 'TOKEN'"),
      }),
    );
    expect(await count()).toBe(before);
  });

  it('the same refusals on PATCH, with the stored spec unchanged and no new revision', async () => {
    const created = await t.api.post('/v2/deployments', body({ min_scale: 1 }));
    expect(created.status).toBe(201);
    const patched = await t.api.patch(`/v2/deployments/${created.body.id}`, {
      source_config: { resource_spec: { volume_mounts: [{ name: 'ghost', mountPath: '/g' }] } },
    });
    expect(patched.status).toBe(422);
    expect(patched.body.detail[0].loc).toEqual(['body', 'source_config', 'resource_spec', 'volume_mounts', 0, 'name']);
    const after = await t.api.get(`/v2/deployments/${created.body.id}`);
    expect(after.body.source_config.resource_spec).toMatchObject({ min_scale: 1 });
    expect(after.body.latest_revision_id).toBe(created.body.latest_revision_id);
  });

  it("a namespace outside the listener's k8s_namespaces: 400 naming it, nothing created, no work for the agent", async () => {
    const before = await count();
    const response = await t.api.post('/v2/deployments', body({}, 'team-z'));
    expect(response.status).toBe(400);
    expect(response.body.detail).toBe("k8s_namespace 'team-z' is not one of the listener's namespaces (team-a).");
    expect(await count()).toBe(before);
    // Every piece of work the listener's agents can claim is in team-a: nothing was queued for team-z.
    const offered = await claimAll('probe');
    expect(offered.length).toBeGreaterThan(0);
    expect(offered.map((w) => w.deployment.k8s_namespace).filter((ns) => ns !== 'team-a')).toEqual([]);
  });

  it("no k8s_namespace given: the deployment runs in the listener's first namespace, and says so", async () => {
    const created = await t.api.post('/v2/deployments', { ...body({}), source_config: { listener_id: listenerId } });
    expect(created.status).toBe(201);
    expect(created.body.source_config.listener_config).toEqual({ k8s_namespace: 'team-a' });
  });

  it("the work item carries what a k8s agent renders from: the namespace and the revision's resource spec", async () => {
    const created = await t.api.post('/v2/deployments', body({ min_scale: 2, labels: { team: 'acme' } }));
    const claimed = await claimAll('probe-2');
    const mine = claimed.find((w) => w.deployment.id === created.body.id);
    expect(mine?.deployment.k8s_namespace).toBe('team-a');
    expect(mine?.revision.resource_spec).toMatchObject({ min_scale: 2, labels: { team: 'acme' } });
  });
});
