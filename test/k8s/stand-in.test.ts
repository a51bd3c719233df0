import { AppsV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, ClusterError } from '../../agent/k8s/cluster.ts';
import { FIELD_MANAGER, LABELS } from '../../agent/k8s/labels.ts';
import { renderRevision } from '../../agent/k8s/render.ts';
import { watchRollout } from '../../agent/k8s/watch-rollout.ts';
import { KubernetesApiStandIn } from './api-stand-in.ts';

/**
 * The agent's cluster calls (`Cluster`, over `@kubernetes/client-node` and a real kubeconfig file)
 * against the Kubernetes API stand-in (a simulation, see api-stand-in.ts): what the agent relies on
 * the API to do, checked as the client sees it.
 */
describe("the k8s agent's cluster calls against the Kubernetes API stand-in (simulated API server)", () => {
  const standIn = new KubernetesApiStandIn(['team-a', 'team-b']);
  let cluster: Cluster;
  let config: KubeConfig;
  const deployment = { id: '5d0c6a52-7f0e-4b7e-9a39-0d5b0a1f2c3d', name: 'support-bot' };
  const render = (revisionId: string, image: string) =>
    renderRevision({
      deployment,
      revision: { id: revisionId, image, secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-1' }] },
      namespace: 'team-a',
      spec: { min_scale: 2, cpu: 1, memory_mb: 256 },
      postgresPassword: 'pw',
      redisPassword: 'rpw',
    });

  beforeAll(async () => {
    await standIn.start();
    standIn.grant('agent-token', { namespaces: ['team-a'] });
    config = new KubeConfig();
    config.loadFromFile(standIn.kubeconfig('agent-token'));
    cluster = new Cluster(config);
  });
  afterAll(() => standIn.stop());

  it('applies server-side with the field manager and force; a second apply of the same object writes nothing; a changed spec bumps generation on the same object', async () => {
    const first = render('rev-1', 'registry.example.com/bot:1');
    const api = first.find((o) => o.kind === 'Deployment')!;
    const created = await cluster.apply(api);
    expect(created.metadata.generation).toBe(1);
    const applies = standIn.requests.filter((r) => r.method === 'PATCH');
    expect(applies.at(-1)).toMatchObject({ contentType: 'application/apply-patch+yaml', query: { fieldManager: FIELD_MANAGER, force: 'true' }, status: 201 });
    expect((created.metadata.managedFields as Array<{ manager: string; operation: string }>)[0]).toMatchObject({ manager: FIELD_MANAGER, operation: 'Apply' });

    const again = await cluster.apply(api);
    expect(again.metadata.resourceVersion).toBe(created.metadata.resourceVersion);

    const second = render('rev-2', 'registry.example.com/bot:2').find((o) => o.kind === 'Deployment')!;
    const updated = await cluster.apply(second);
    expect(updated.metadata.uid).toBe(created.metadata.uid);
    expect(updated.metadata.generation).toBe(2);
    expect(Number(updated.metadata.resourceVersion)).toBeGreaterThan(Number(created.metadata.resourceVersion));
    expect(updated.metadata.labels?.[LABELS.revisionId]).toBe('rev-2');
  });

  it("what the agent applies arrives whole through the client: every field of a full ResourceSpec's objects is stored as rendered", async () => {
    const full = renderRevision({
      deployment: { id: '77777777-7f0e-4b7e-9a39-0d5b0a1f2c3d', name: 'full' },
      revision: { id: 'rev-full', image: 'registry.example.com/full:1', secrets: [{ name: 'K', value: 'v' }] },
      namespace: 'team-a',
      spec: {
        min_scale: 1,
        max_scale: 4,
        cpu: 0.5,
        memory_mb: 256,
        redis_memory_mb: 64,
        db_cpu: 1,
        db_memory_mb: 128,
        db_storage_gi: 3,
        db_max_connections: 50,
        labels: { team: 'x' },
        annotations: { note: 'y' },
        service_account_name: 'runner',
        image_pull_secrets: [{ name: 'regcred' }],
        volumes: [
          { name: 'cache', emptyDir: { sizeLimit: '1Gi' } },
          { name: 'cfg', projected: { sources: [{ configMap: { name: 'c' } }] } },
        ],
        volume_mounts: [{ name: 'cache', mountPath: '/cache', subPath: 'a', readOnly: true }],
        init_containers: [
          {
            name: 'init',
            image: 'i:1',
            command: ['a'],
            args: ['b'],
            workingDir: '/w',
            envFrom: [{ configMapRef: { name: 'c' } }],
            resources: { requests: { cpu: '10m' } },
            securityContext: { runAsNonRoot: true },
          },
        ],
        sidecars: [
          { name: 'native', image: 's:1', restartPolicy: 'Always' },
          { name: 'plain', image: 'p:1', imagePullPolicy: 'Always', env: [{ name: 'N', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }] },
        ],
      },
      postgresPassword: 'pw',
      redisPassword: 'rpw',
    });
    for (const object of full) {
      await cluster.apply(object);
      const stored = standIn.get(object.kind, 'team-a', object.metadata.name)!;
      const { metadata, ...rest } = object;
      expect(stored, `${object.kind} ${object.metadata.name}`).toMatchObject(rest);
      expect(stored.metadata).toMatchObject(metadata);
    }
  });

  it('lists by label selector, reads one, deletes one, and answers 404 as a Status for one that is gone', async () => {
    for (const object of render('rev-2', 'registry.example.com/bot:2')) await cluster.apply(object);
    const secrets = await cluster.list('v1', 'Secret', 'team-a', `${LABELS.deploymentId}=${deployment.id}`);
    expect(secrets.map((s) => s.metadata.name).sort()).toEqual(['support-bot-5d0c6a52-env-rev-2', 'support-bot-5d0c6a52-postgres']);
    expect(await cluster.list('v1', 'Secret', 'team-a', `${LABELS.deploymentId}=someone-else`)).toEqual([]);
    await cluster.delete(secrets[0]!);
    expect(await cluster.read('v1', 'Secret', 'team-a', secrets[0]!.metadata.name)).toBeNull();
    await cluster.delete(secrets[0]!); // already gone: not an error
  });

  it('refuses an object that breaks the Kubernetes schema with 422 naming the field, and stores nothing', async () => {
    const bad = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'broken', namespace: 'team-a' },
      spec: {
        replicas: 'two',
        selector: { matchLabels: { a: 'b' } },
        template: { metadata: { labels: { a: 'b' } }, spec: { containers: [{ name: 'c', image: 'x' }] } },
      },
    };
    const error = await cluster.apply(bad).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterError);
    expect((error as ClusterError).code).toBe(422);
    expect((error as ClusterError).message).toContain('spec/replicas must be integer');
    expect(standIn.get('Deployment', 'team-a', 'broken')).toBeUndefined();
  });

  it('refuses a changed selector and a changed StatefulSet claim template, as a real API server does', async () => {
    const set = render('rev-3', 'registry.example.com/bot:3').find((o) => o.kind === 'StatefulSet')!;
    await cluster.apply(set);
    const bigger = structuredClone(set) as any;
    bigger.spec.volumeClaimTemplates[0].spec.resources.requests.storage = '50Gi';
    const error = (await cluster.apply(bigger).catch((e: unknown) => e)) as ClusterError;
    expect(error.code).toBe(422);
    expect(error.message).toContain('updates to statefulset spec for fields other than');
  });

  it("answers 401 to an unknown token and 403 (a Status naming the verb, resource and namespace) outside the token's rights", async () => {
    const stranger = new KubeConfig();
    stranger.loadFromFile(standIn.kubeconfig('nobody'));
    const unknown = (await new Cluster(stranger).read('v1', 'Secret', 'team-a', 'x').catch((e: unknown) => e)) as ClusterError;
    expect(unknown.code).toBe(401);

    const elsewhere = renderRevision({
      deployment,
      revision: { id: 'r', image: 'i', secrets: [] },
      namespace: 'team-b',
      spec: null,
      postgresPassword: 'pw',
      redisPassword: 'rpw',
    })[0]!;
    const forbidden = (await cluster.apply(elsewhere).catch((e: unknown) => e)) as ClusterError;
    expect(forbidden.code).toBe(403);
    expect(forbidden.message).toContain('cannot patch resource "secrets" in API group "" in the namespace "team-b"');
    expect(standIn.objects('Secret', 'team-b')).toEqual([]);
  });

  it('its simulated controllers (driven by the test) make pods, write status through generation, and keep old pods while new ones cannot pull', async () => {
    const api = render('rev-4', 'registry.example.com/bot:4').find((o) => o.metadata.name.endsWith('-api-server') && o.kind === 'Deployment')!;
    // Its pods read the env Secret: without it the simulated kubelet reports CreateContainerConfigError.
    for (const secret of render('rev-4', 'registry.example.com/bot:4').filter((o) => o.kind === 'Secret')) await cluster.apply(secret);
    await cluster.apply(api);
    standIn.reconcileTimes(8);
    const live = (await cluster.read('apps/v1', 'Deployment', 'team-a', api.metadata.name))!;
    expect(live.status).toMatchObject({ observedGeneration: live.metadata.generation, updatedReplicas: 2, availableReplicas: 2 });

    standIn.imageFate = (image) =>
      image.endsWith(':broken')
        ? { pull: 'fail', reason: 'ImagePullBackOff', message: 'Back-off pulling image "registry.example.com/bot:broken"' }
        : { pull: 'ok' };
    for (const secret of render('rev-5', 'registry.example.com/bot:broken').filter((o) => o.kind === 'Secret')) await cluster.apply(secret);
    await cluster.apply(render('rev-5', 'registry.example.com/bot:broken').find((o) => o.metadata.name === api.metadata.name && o.kind === 'Deployment')!);
    standIn.reconcileTimes(3);
    const pods = await cluster.list('v1', 'Pod', 'team-a', `${LABELS.deploymentId}=${deployment.id},${LABELS.component}=api-server`);
    const byRevision = (id: string) => pods.filter((p) => p.metadata.labels?.[LABELS.revisionId] === id);
    expect(byRevision('rev-4')).toHaveLength(2);
    expect(byRevision('rev-5')[0]?.status).toMatchObject({ containerStatuses: [{ state: { waiting: { reason: 'ImagePullBackOff' } } }] });
    standIn.imageFate = () => ({ pull: 'ok' });
  });

  it('the rollout watch gives up at its deadline, saying what it still waited for (no controller runs here)', async () => {
    const objects = renderRevision({
      deployment: { id: '88888888-7f0e-4b7e-9a39-0d5b0a1f2c3d', name: 'slow' },
      revision: { id: 'rev-slow', image: 'i:1', secrets: [] },
      namespace: 'team-a',
      spec: null,
      postgresPassword: 'pw',
      redisPassword: 'rpw',
    });
    for (const object of objects) await cluster.apply(object);
    const workloads = objects.filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet');
    const seen: string[] = [];
    const outcome = await watchRollout(cluster, workloads, 'rev-slow', {
      pollMs: 20,
      deadlineMs: 200,
      signal: new AbortController().signal,
      onProgress: (w) => seen.push(w),
    });
    expect(outcome).toEqual({
      state: 'failed',
      reason: 'the rollout did not finish within 200 ms; still waiting for Deployment slow-88888888-api-server: generation 1 not observed yet',
    });
    expect(seen).toEqual(['Deployment slow-88888888-api-server: generation 1 not observed yet']);
  });

  it('/status is a subresource: writing it changes neither spec nor generation, and an apply to the object leaves status alone', async () => {
    const api = render('rev-status', 'registry.example.com/bot:s').find((o) => o.kind === 'Deployment' && o.metadata.name.endsWith('-queue'))!;
    const applied = await cluster.apply(api);
    const apps = config.makeApiClient(AppsV1Api);
    const written = await apps.replaceNamespacedDeploymentStatus({
      name: api.metadata.name,
      namespace: 'team-a',
      body: {
        ...(applied as any),
        spec: { ...(applied as any).spec, replicas: 9 },
        status: { observedGeneration: applied.metadata.generation as number, replicas: 2, updatedReplicas: 2, availableReplicas: 2 },
      },
    });
    expect(written.status).toMatchObject({ replicas: 2, availableReplicas: 2 });
    expect(written.spec?.replicas).toBe(2);
    expect(written.metadata?.generation).toBe(applied.metadata.generation);
    const reapplied = await cluster.apply({ ...api, status: { replicas: 0 } } as any);
    expect(reapplied.status).toMatchObject({ replicas: 2, availableReplicas: 2 });
  });
});
