import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIELD_MANAGER, LABELS } from '../../agent/k8s/labels.ts';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { KubernetesApiStandIn } from './api-stand-in.ts';
import { grantDocumentedRole, type K8sAgentProcess, k8sListener, startK8sAgent } from './harness.ts';

const NAMESPACE = 'team-a';
const KINDS = ['Secret', 'Service', 'Deployment', 'StatefulSet', 'HorizontalPodAutoscaler', 'NetworkPolicy', 'PersistentVolumeClaim'];

/**
 * The `k8s` listener agent end to end: the real control plane and the real agent process
 * (`npm run agent -- --compute k8s`) on loopback, talking to the Kubernetes API stand-in through
 * `@kubernetes/client-node` and a kubeconfig. SIMULATED: the Kubernetes API server itself
 * (test/k8s/api-stand-in.ts), whose controllers the tests run: `startControllers()` makes pods
 * become ready, `imageFate` makes a pretend kubelet fail to pull an image.
 */
describe('k8s agent against the Kubernetes API stand-in (simulated cluster)', () => {
  const standIn = new KubernetesApiStandIn([NAMESPACE, 'team-b']);
  let server: ServerProcess;
  let api: Api;
  let agent: K8sAgentProcess | undefined;
  let listener: { listenerId: string; token: string };
  let kubeconfig: string;

  beforeAll(async () => {
    await standIn.start();
    grantDocumentedRole(standIn, 'agent-sa-token', [NAMESPACE]);
    kubeconfig = standIn.kubeconfig('agent-sa-token', NAMESPACE);
    server = await startServerProcess({ RECONCILE_INTERVAL_MS: '0', AGENT_LEASE_MS: '3000' });
    api = apiClient(server.url, server.apiKey);
    listener = await k8sListener(api, [NAMESPACE]);
    agent = await startK8sAgent({ url: server.url, token: listener.token, listenerId: listener.listenerId, kubeconfig, args: ['--namespace', NAMESPACE] });
  });

  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await server?.kill('SIGTERM');
    await standIn.stop();
  });

  const labelled = (deploymentId: string) => KINDS.flatMap((kind) => standIn.objects(kind, NAMESPACE, `${LABELS.deploymentId}=${deploymentId}`));
  const latestRevision = async (deploymentId: string) =>
    (await api.get(`/v2/deployments/${deploymentId}/revisions?limit=1`)).body.resources[0] as { id: string; status: string; status_message: string | null };
  const create = async (name: string, image: string, resourceSpec: Record<string, unknown>, namespace = NAMESPACE) =>
    api.post('/v2/deployments', {
      name,
      source: 'external_docker',
      source_config: { listener_id: listener.listenerId, listener_config: { k8s_namespace: namespace }, resource_spec: resourceSpec },
      source_revision_config: { image_uri: image },
      secrets: [
        { name: 'OPENAI_API_KEY', value: 'sk-e2e-secret' },
        { name: 'LANGSMITH_API_KEY', value: 'lsv2-e2e' },
      ],
    });

  it('create → DEPLOYED; a new image → the same objects updated in place → DEPLOYED; an image that cannot be pulled → DEPLOY_FAILED naming the pull error, the previous revision still serving; a lower max_scale prunes the autoscaler; DELETE → every labelled object gone', {
    timeout: 120_000,
  }, async () => {
    standIn.startControllers(50);
    const created = await create(uniqueName('k8s'), 'registry.example.com/acme/bot:1', {
      min_scale: 1,
      max_scale: 3,
      cpu: 1,
      memory_mb: 512,
      db_storage_gi: 5,
      labels: { team: 'acme' },
    });
    expect(created.status).toBe(201);
    const deploymentId = created.body.id as string;
    const first = await revisionReaches(api, deploymentId, created.body.latest_revision_id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000);
    expect(first.status).toBe('DEPLOYED');

    const objects = labelled(deploymentId);
    // Secret ×2, Service ×3, Deployment ×3, StatefulSet, an HPA each for the API server and the queue
    // (max_scale > min_scale with a CPU request; the queue's default to the API's), a NetworkPolicy
    // each for Redis and PostgreSQL, and the claim PostgreSQL's StatefulSet made.
    expect(objects.map((o) => o.kind).sort()).toEqual([
      'Deployment',
      'Deployment',
      'Deployment',
      'HorizontalPodAutoscaler',
      'HorizontalPodAutoscaler',
      'NetworkPolicy',
      'NetworkPolicy',
      'PersistentVolumeClaim',
      'Secret',
      'Secret',
      'Service',
      'Service',
      'Service',
      'StatefulSet',
    ]);
    for (const object of objects.filter((o) => o.kind !== 'PersistentVolumeClaim')) {
      expect(object.metadata.labels).toMatchObject({
        [LABELS.managedBy]: 'agent-control-plane',
        [LABELS.deploymentId]: deploymentId,
        [LABELS.revisionId]: first.id,
        team: 'acme',
      });
      expect((object.metadata.managedFields as Array<{ manager: string }>).map((m) => m.manager)).toContain(FIELD_MANAGER);
    }
    const apiServer = objects.find((o) => o.kind === 'Deployment' && o.metadata.labels?.[LABELS.component] === 'api-server')!;
    expect(apiServer.spec.template.spec.containers[0].image).toBe('registry.example.com/acme/bot:1');
    const envSecret = objects.find((o) => o.kind === 'Secret' && o.metadata.labels?.[LABELS.component] === 'api-server')!;
    expect(Buffer.from((envSecret.data as Record<string, string>).OPENAI_API_KEY!, 'base64').toString()).toBe('sk-e2e-secret');
    const uids = new Map(objects.map((o) => [`${o.kind}/${o.metadata.name}`, o.metadata.uid]));

    // A new image: the same objects, updated in place (same uid, next generation), then DEPLOYED.
    expect((await api.patch(`/v2/deployments/${deploymentId}`, { source_revision_config: { image_uri: 'registry.example.com/acme/bot:2' } })).status).toBe(200);
    const second = await latestRevision(deploymentId);
    expect((await revisionReaches(api, deploymentId, second.id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000)).status).toBe('DEPLOYED');
    const updated = standIn.get('Deployment', NAMESPACE, apiServer.metadata.name)!;
    expect(updated.metadata.uid).toBe(apiServer.metadata.uid);
    expect(updated.metadata.generation).toBe((apiServer.metadata.generation as number) + 1);
    expect(updated.spec.template.spec.containers[0].image).toBe('registry.example.com/acme/bot:2');
    // The same objects, but the env Secret: one per revision, the first revision's pruned once the second is live.
    const isEnvSecret = (o: { kind: string; metadata: { labels?: Record<string, string> } }) =>
      o.kind === 'Secret' && o.metadata.labels?.[LABELS.component] === 'api-server';
    for (const object of labelled(deploymentId).filter((o) => !isEnvSecret(o)))
      expect(object.metadata.uid).toBe(uids.get(`${object.kind}/${object.metadata.name}`));
    expect(
      labelled(deploymentId)
        .filter(isEnvSecret)
        .map((o) => o.metadata.labels?.[LABELS.revisionId]),
    ).toEqual([second.id]);
    const servingPods = () => standIn.objects('Pod', NAMESPACE, `${LABELS.deploymentId}=${deploymentId},${LABELS.component}=api-server`);
    expect(servingPods().map((p) => p.metadata.labels?.[LABELS.revisionId])).toEqual([second.id]);

    // An image that cannot be pulled: DEPLOY_FAILED with the pod's reason and message; the old pod keeps serving.
    standIn.imageFate = (image) =>
      image.endsWith(':missing')
        ? { pull: 'fail', reason: 'ImagePullBackOff', message: 'Back-off pulling image "registry.example.com/acme/bot:missing"' }
        : { pull: 'ok' };
    await api.patch(`/v2/deployments/${deploymentId}`, { source_revision_config: { image_uri: 'registry.example.com/acme/bot:missing' } });
    const third = await latestRevision(deploymentId);
    const failed = await revisionReaches(api, deploymentId, third.id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000);
    expect(failed.status).toBe('DEPLOY_FAILED');
    expect(failed.status_message).toContain('ImagePullBackOff');
    expect(failed.status_message).toContain('Back-off pulling image "registry.example.com/acme/bot:missing"');
    expect(failed.status_message).toContain(`The previous revision (${second.id}) keeps serving.`);
    const pods = servingPods();
    const oldPods = pods.filter((p) => p.metadata.labels?.[LABELS.revisionId] === second.id);
    expect(oldPods).toHaveLength(1);
    expect(oldPods[0]!.status.conditions).toContainEqual({ type: 'Ready', status: 'True' });
    expect(oldPods[0]!.spec.containers[0].image).toBe('registry.example.com/acme/bot:2');
    const deployLog = (await api.get(`/v2/deployments/${deploymentId}/revisions/${third.id}/logs?type=deploy&limit=1000`)).body.logs as Array<{
      message: string;
    }>;
    expect(deployLog.some((l) => l.message.includes('ImagePullBackOff'))).toBe(true);
    standIn.imageFate = () => ({ pull: 'ok' });

    // max_scale down to min_scale: no autoscaler any more; once the revision is live, the old one is deleted.
    await api.patch(`/v2/deployments/${deploymentId}`, {
      source_revision_config: { image_uri: 'registry.example.com/acme/bot:3' },
      source_config: { resource_spec: { min_scale: 2, max_scale: 2, cpu: 1, memory_mb: 512, db_storage_gi: 5, labels: { team: 'acme' } } },
    });
    const fourth = await latestRevision(deploymentId);
    expect((await revisionReaches(api, deploymentId, fourth.id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000)).status).toBe('DEPLOYED');
    expect(standIn.objects('HorizontalPodAutoscaler', NAMESPACE, `${LABELS.deploymentId}=${deploymentId}`)).toEqual([]);
    expect(standIn.get('Deployment', NAMESPACE, apiServer.metadata.name)!.spec.replicas).toBe(2);

    // DELETE: every labelled object goes, the PostgreSQL claim too; then the deployment is gone.
    expect((await api.delete(`/v2/deployments/${deploymentId}`)).status).toBeLessThan(300);
    await eventually(async () => ((await api.get(`/v2/deployments/${deploymentId}`)).status === 404 ? true : undefined), 30_000);
    expect(labelled(deploymentId)).toEqual([]);
    expect(standIn.all().filter((o) => o.metadata.labels?.[LABELS.deploymentId] === deploymentId)).toEqual([]);

    // The secret reached the cluster (above) and nowhere else: not the agent's output, not the server's log.
    expect(agent!.output()).not.toContain('sk-e2e-secret');
    expect(server.output()).not.toContain('sk-e2e-secret');
  });

  it("a namespace outside the listener's list is refused at the API before anything reaches the cluster", async () => {
    const before = standIn.requests.length;
    const refused = await create(uniqueName('k8s-ns'), 'registry.example.com/acme/bot:1', {}, 'team-b');
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toContain("'team-b' is not one of the listener's namespaces");
    await new Promise((r) => setTimeout(r, 500));
    expect(standIn.requests.slice(before).filter((r) => r.path.includes('/namespaces/team-b'))).toEqual([]);
    expect(standIn.all().filter((o) => o.metadata.namespace === 'team-b')).toEqual([]);
  });

  it('the agent killed mid-rollout: a new agent resumes watching the applied objects without applying them again, and reports DEPLOYED', {
    timeout: 120_000,
  }, async () => {
    standIn.stopControllers();
    const created = await create(uniqueName('k8s-restart'), 'registry.example.com/acme/bot:7', { min_scale: 1, max_scale: 1 });
    const deploymentId = created.body.id as string;
    const revisionId = created.body.latest_revision_id as string;
    await eventually(async () => ((await deployLogOf(deploymentId, revisionId)).some((m) => m.startsWith('rollout: waiting for')) ? true : undefined), 30_000);
    const applied = labelled(deploymentId);
    expect(applied.length).toBeGreaterThanOrEqual(9);
    await agent!.stop('SIGKILL');
    const appliesBefore = standIn.requests.filter((r) => r.method === 'PATCH' || r.method === 'POST').length;

    agent = await startK8sAgent({ url: server.url, token: listener.token, listenerId: listener.listenerId, kubeconfig, args: ['--namespace', NAMESPACE] });
    // The killed agent's lease lapses (3 s here); the new agent claims the DEPLOYING revision and finds it applied.
    await eventually(async () => ((await deployLogOf(deploymentId, revisionId)).some((m) => m.includes('already applied')) ? true : undefined), 30_000);
    expect((await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}`)).body.status).toBe('DEPLOYING');
    standIn.startControllers(50);
    expect((await revisionReaches(api, deploymentId, revisionId, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000)).status).toBe('DEPLOYED');
    expect(standIn.requests.filter((r) => r.method === 'PATCH' || r.method === 'POST').length).toBe(appliesBefore);
    for (const object of applied) {
      const now = standIn.get(object.kind, NAMESPACE, object.metadata.name)!;
      expect(now.metadata.uid).toBe(object.metadata.uid);
      expect(now.metadata.generation).toBe(object.metadata.generation);
    }
  });

  it('an interrupt wins over a rollout in progress: the agent stops watching it, and the next revision rolls out', { timeout: 60_000 }, async () => {
    standIn.stopControllers();
    const created = await create(uniqueName('k8s-interrupt'), 'registry.example.com/acme/bot:8', { min_scale: 1, max_scale: 1 });
    const deploymentId = created.body.id as string;
    const revisionId = created.body.latest_revision_id as string;
    await eventually(async () => ((await deployLogOf(deploymentId, revisionId)).some((m) => m.startsWith('rollout: waiting for')) ? true : undefined), 30_000);
    const interrupted = await api.post(`/v2/deployments/${deploymentId}/revisions/${revisionId}/interrupt`);
    expect(interrupted.status).toBe(200);
    await eventually(async () => (agent!.output().includes(`stopped work on revision ${revisionId}`) ? true : undefined), 30_000);
    expect((await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}`)).body.status).toBe('INTERRUPTED');

    standIn.startControllers(50);
    await api.patch(`/v2/deployments/${deploymentId}`, { source_revision_config: { image_uri: 'registry.example.com/acme/bot:9' } });
    const next = await latestRevision(deploymentId);
    expect(next.id).not.toBe(revisionId);
    expect((await revisionReaches(api, deploymentId, next.id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000)).status).toBe('DEPLOYED');
    expect(
      standIn.objects('Deployment', NAMESPACE, `${LABELS.deploymentId}=${deploymentId},${LABELS.component}=api-server`)[0]!.spec.template.spec.containers[0]
        .image,
    ).toBe('registry.example.com/acme/bot:9');
  });

  it('the agent refuses a namespace outside its own --namespace list before sending anything, and a 403 from the cluster fails the revision naming it', {
    timeout: 60_000,
  }, async () => {
    // A second listener allows three namespaces; its agent is started for two; its RBAC covers one.
    const wide = await k8sListener(api, ['team-a', 'team-b', 'team-c']);
    const narrowAgent = await startK8sAgent({
      url: server.url,
      token: wide.token,
      listenerId: wide.listenerId,
      kubeconfig,
      args: ['--namespace', 'team-a,team-b'],
    });
    try {
      const post = (namespace: string) =>
        api.post('/v2/deployments', {
          name: uniqueName('k8s-wide'),
          source: 'external_docker',
          source_config: { listener_id: wide.listenerId, listener_config: { k8s_namespace: namespace } },
          source_revision_config: { image_uri: 'registry.example.com/acme/bot:1' },
        });
      const before = standIn.requests.length;
      const outside = await post('team-c');
      expect(outside.status).toBe(201);
      const refused = await revisionReaches(api, outside.body.id, outside.body.latest_revision_id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000);
      expect(refused.status).toBe('DEPLOY_FAILED');
      expect(refused.status_message).toContain("namespace 'team-c' is not one of this agent's namespaces (team-a, team-b); nothing was sent to the cluster");
      expect(standIn.requests.slice(before).filter((r) => r.path.includes('/namespaces/team-c'))).toEqual([]);

      const forbidden = await post('team-b');
      const failed = await revisionReaches(api, forbidden.body.id, forbidden.body.latest_revision_id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000);
      expect(failed.status).toBe('DEPLOY_FAILED');
      expect(failed.status_message).toContain('Kubernetes API 403');
      expect(failed.status_message).toContain('in the namespace "team-b"');
      expect(standIn.all().filter((o) => o.metadata.namespace === 'team-b')).toEqual([]);
    } finally {
      await narrowAgent.stop();
    }
  });

  it("--keep-volumes: a teardown deletes every labelled object but PostgreSQL's volume claim; the pods go with their workloads (the agent may not delete pods)", {
    timeout: 60_000,
  }, async () => {
    standIn.startControllers(50);
    const keeping = await k8sListener(api, [NAMESPACE]);
    const keepingAgent = await startK8sAgent({
      url: server.url,
      token: keeping.token,
      listenerId: keeping.listenerId,
      kubeconfig,
      args: ['--namespace', NAMESPACE, '--keep-volumes'],
    });
    try {
      const created = await api.post('/v2/deployments', {
        name: uniqueName('k8s-keep'),
        source: 'external_docker',
        source_config: { listener_id: keeping.listenerId, listener_config: { k8s_namespace: NAMESPACE } },
        source_revision_config: { image_uri: 'registry.example.com/acme/bot:1' },
      });
      const deploymentId = created.body.id as string;
      expect((await revisionReaches(api, deploymentId, created.body.latest_revision_id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000)).status).toBe('DEPLOYED');
      const claims = standIn.objects('PersistentVolumeClaim', NAMESPACE, `${LABELS.deploymentId}=${deploymentId}`);
      expect(claims).toHaveLength(1);
      expect(standIn.objects('Pod', NAMESPACE, `${LABELS.deploymentId}=${deploymentId}`).length).toBeGreaterThan(0);
      await api.delete(`/v2/deployments/${deploymentId}`);
      await eventually(async () => ((await api.get(`/v2/deployments/${deploymentId}`)).status === 404 ? true : undefined), 30_000);
      expect(labelled(deploymentId).map((o) => `${o.kind} ${o.metadata.name}`)).toEqual([`PersistentVolumeClaim ${claims[0]!.metadata.name}`]);
      expect(standIn.objects('Pod', NAMESPACE, `${LABELS.deploymentId}=${deploymentId}`)).toEqual([]);
      expect(keepingAgent.output()).toContain('(volume claims kept)');
    } finally {
      await keepingAgent.stop();
    }
  });

  async function deployLogOf(deploymentId: string, revisionId: string): Promise<string[]> {
    const logs = (await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}/logs?type=deploy&limit=1000`)).body.logs as Array<{ message: string }>;
    return logs.map((l) => l.message);
  }
});
