import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * What the API refuses of a deployment on a `k8s` listener because Kubernetes, or a LangGraph image
 * on it, would (contract §18): 422 naming the field, nothing created or changed, no new revision.
 */
describe('deployments on a k8s listener: the §18 refusals at the API', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  const listeners: Record<'plain' | 'licensed' | 'privileged', string> = { plain: '', licensed: '', privileged: '' };
  const license = [{ name: 'LANGGRAPH_CLOUD_LICENSE_KEY', value: 'lcl-test' }];

  beforeAll(async () => {
    t = await inProcessApp();
    const make = async (config: Record<string, unknown>) => {
      const created = await t.api.post('/v2/listeners', {
        compute_type: 'k8s',
        compute_id: uniqueName('k8s'),
        compute_config: { k8s_namespaces: ['team-a'], ...config },
      });
      expect(created.status).toBe(201);
      return created.body.id as string;
    };
    listeners.plain = await make({});
    listeners.licensed = await make({ k8s_license_secret: 'langgraph-license' });
    listeners.privileged = await make({ k8s_license_secret: 'langgraph-license', k8s_allow_privileged: true });
  });
  afterAll(() => t.close());

  const body = (listener: keyof typeof listeners, resourceSpec: Record<string, unknown>, secrets: Array<{ name: string; value: string }> = license) => ({
    name: uniqueName('rules'),
    source: 'external_docker',
    source_config: { listener_id: listeners[listener], resource_spec: resourceSpec },
    source_revision_config: { image_uri: 'registry.example.com/acme/bot:1' },
    secrets,
  });
  const count = async () => (await t.api.get('/v2/deployments?limit=100')).body.resources.length as number;
  const refused = async (request: Record<string, unknown>) => {
    const before = await count();
    const response = await t.api.post('/v2/deployments', request);
    expect(response.status).toBe(422);
    expect(await count()).toBe(before);
    return response.body.detail as Array<{ loc: unknown[]; msg: string }>;
  };

  it('no license key among the secrets and none on the listener: 422 on secrets; either secret name, or the listener’s k8s_license_secret, is enough', async () => {
    const detail = await refused(body('plain', { min_scale: 1 }, [{ name: 'OPENAI_API_KEY', value: 'sk' }]));
    expect(detail).toEqual([
      expect.objectContaining({ loc: ['body', 'secrets'], msg: expect.stringContaining('LANGGRAPH_CLOUD_LICENSE_KEY or LANGSMITH_API_KEY') }),
    ]);
    expect((await t.api.post('/v2/deployments', body('plain', {}, [{ name: 'LANGSMITH_API_KEY', value: 'ls' }]))).status).toBe(201);
    expect((await t.api.post('/v2/deployments', body('plain', {}))).status).toBe(201);
    expect((await t.api.post('/v2/deployments', body('licensed', {}, []))).status).toBe(201);
  });

  it('the listener shows its k8s settings, keeps them across a PATCH of its namespaces; a bad Secret name is refused', async () => {
    const shown = await t.api.get(`/v2/listeners/${listeners.privileged}`);
    expect(shown.body.compute_config).toEqual({ k8s_namespaces: ['team-a'], k8s_license_secret: 'langgraph-license', k8s_allow_privileged: true });
    // A PATCH of the namespaces keeps the k8s settings; null clears one.
    const patched = await t.api.patch(`/v2/listeners/${listeners.privileged}`, { compute_config: { k8s_namespaces: ['team-a', 'team-b'] } });
    expect(patched.body.compute_config).toEqual({ k8s_namespaces: ['team-a', 'team-b'], k8s_license_secret: 'langgraph-license', k8s_allow_privileged: true });
    const cleared = await t.api.patch(`/v2/listeners/${listeners.privileged}`, { compute_config: { k8s_namespaces: ['team-a'], k8s_allow_privileged: null } });
    expect(cleared.body.compute_config).toEqual({ k8s_namespaces: ['team-a'], k8s_license_secret: 'langgraph-license' });
    await t.api.patch(`/v2/listeners/${listeners.privileged}`, { compute_config: { k8s_namespaces: ['team-a'], k8s_allow_privileged: true } });
    const bad = await t.api.post('/v2/listeners', { compute_type: 'k8s', compute_id: uniqueName('k8s'), compute_config: { k8s_license_secret: 'Not A Name' } });
    expect(bad.status).toBe(422);
  });

  it('min_scale 0: 422 naming it', async () => {
    const detail = await refused(body('licensed', { min_scale: 0 }));
    expect(detail.map((d) => d.loc)).toEqual([['body', 'source_config', 'resource_spec', 'min_scale']]);
  });

  it('a container’s own securityContext: 422 naming it, unless the listener allows privileged settings', async () => {
    const spec = { sidecars: [{ name: 'proxy', image: 'proxy:1', securityContext: { privileged: true } }] };
    const detail = await refused(body('licensed', spec));
    expect(detail.map((d) => d.loc)).toEqual([['body', 'source_config', 'resource_spec', 'sidecars', 0, 'securityContext']]);
    expect((await t.api.post('/v2/deployments', body('privileged', spec))).status).toBe(201);
    // hostPath is not among the volume types the ResourceSpec carries: it never reaches a stored spec (nor a pod).
    const host = await t.api.post('/v2/deployments', body('privileged', { volumes: [{ name: 'host', hostPath: { path: '/' } }] }));
    if (host.status === 201) expect(JSON.stringify(host.body.source_config.resource_spec)).not.toContain('hostPath');
    else expect(host.status).toBe(422);
  });

  it('label and annotation syntax as Kubernetes checks it: keys (prefix and name), label values, total annotation size', async () => {
    const detail = await refused(
      body('licensed', {
        labels: { 'team/a/b': 'x', 'ok.example.com/name': 'fine', 'Bad_Prefix/x': 'y', valid: 'has spaces', long: 'v'.repeat(64) },
        annotations: { '-nope': 'x', 'example.com/doc': 'any text at all, spaces too' },
      }),
    );
    expect(detail.map((d) => d.loc)).toEqual([
      ['body', 'source_config', 'resource_spec', 'labels', 'team/a/b'],
      ['body', 'source_config', 'resource_spec', 'labels', 'Bad_Prefix/x'],
      ['body', 'source_config', 'resource_spec', 'labels', 'valid'],
      ['body', 'source_config', 'resource_spec', 'labels', 'long'],
      ['body', 'source_config', 'resource_spec', 'annotations', '-nope'],
    ]);
    const big = await refused(body('licensed', { annotations: { a: 'x'.repeat(256 * 1024) } }));
    expect(big[0]?.msg).toContain('at most 262144');
  });

  it('PATCH: a db_storage_gi change is 422 (the claim template cannot change), also from the default; the same rules as create; nothing stored, no revision', async () => {
    const created = await t.api.post('/v2/deployments', body('licensed', { min_scale: 1, db_storage_gi: 5 }));
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    for (const change of [{ db_storage_gi: 20 }, { db_storage_gi: null }, { min_scale: 0, db_storage_gi: 5 }]) {
      const patched = await t.api.patch(`/v2/deployments/${id}`, { source_config: { resource_spec: change } });
      expect(patched.status).toBe(422);
    }
    const unchanged = await t.api.get(`/v2/deployments/${id}`);
    expect(unchanged.body.source_config.resource_spec).toMatchObject({ db_storage_gi: 5 });
    expect(unchanged.body.latest_revision_id).toBe(created.body.latest_revision_id);
    // The same size, or other fields with it: accepted.
    expect((await t.api.patch(`/v2/deployments/${id}`, { source_config: { resource_spec: { min_scale: 2, db_storage_gi: 5 } } })).status).toBe(200);
    // POST …/revisions checks as PATCH does.
    const none = await t.api.post('/v2/deployments', body('licensed', {}));
    expect(
      (await t.api.post(`/v2/deployments/${none.body.id}/revisions`, { source_config: { resource_spec: { db_storage_gi: 10, min_scale: 0 } } })).status,
    ).toBe(422);
  });
});
