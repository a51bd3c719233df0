import { KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneEarlier, Superseded } from '../../agent/k8s/apply-revision.ts';
import { Cluster } from '../../agent/k8s/cluster.ts';
import { FIELD_MANAGER, type K8sObject } from '../../agent/k8s/labels.ts';
import { renderRevision } from '../../agent/k8s/render.ts';
import { watchRollout } from '../../agent/k8s/watch-rollout.ts';
import { KubernetesApiStandIn } from './api-stand-in.ts';
import { fieldsOwnedBy } from './server-side-apply.ts';

/**
 * The Kubernetes API stand-in's SIMULATED controllers behave as a cluster's do, one step per
 * `reconcile()` pass (test/k8s/api-stand-in.ts): what the k8s agent must be right against. The
 * cluster is simulated; the client, the kubeconfig and the HTTP are real.
 */
describe('the simulated cluster (Kubernetes API stand-in): rollouts in steps, failures, admission, field ownership', () => {
  const standIn = new KubernetesApiStandIn(['sim', 'locked']);
  let cluster: Cluster;
  let objects: KubernetesObjectApi;

  beforeAll(async () => {
    await standIn.start();
    standIn.grant('t', { namespaces: ['*'] });
    const config = new KubeConfig();
    config.loadFromFile(standIn.kubeconfig('t'));
    cluster = new Cluster(config);
    objects = KubernetesObjectApi.makeApiClient(config);
    standIn.enforcePodSecurityRestricted('locked');
  });
  afterAll(() => standIn.stop());

  const deployment = (
    name: string,
    image: string,
    extra: { replicas?: number; strategy?: unknown; podSpec?: Record<string, unknown>; ns?: string } = {},
  ): K8sObject => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: extra.ns ?? 'sim', labels: { app: name } },
    spec: {
      replicas: extra.replicas ?? 1,
      selector: { matchLabels: { app: name } },
      ...(extra.strategy ? { strategy: extra.strategy } : {}),
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'main', image }], ...extra.podSpec } },
    },
  });
  const statusOf = async (kind: string, name: string, ns = 'sim') => (await cluster.read('apps/v1', kind, ns, name))!.status as Record<string, any>;
  const condition = (status: Record<string, any>, type: string) => (status.conditions as Array<{ type: string }> | undefined)?.find((c) => c.type === type);
  const pods = (prefix: string, ns = 'sim') => standIn.objects('Pod', ns).filter((p) => p.metadata.name.startsWith(prefix));

  it('a rolling update moves in steps: a new pod is ContainerCreating first, old pods go only once new ones are available, within maxSurge / maxUnavailable, with the controller’s conditions', async () => {
    await cluster.apply(deployment('web', 'img:1', { replicas: 2, strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }));
    standIn.reconcileTimes(4);
    expect(await statusOf('Deployment', 'web')).toMatchObject({ replicas: 2, updatedReplicas: 2, availableReplicas: 2 });

    await cluster.apply(deployment('web', 'img:2', { replicas: 2, strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }));
    standIn.reconcile();
    // The state of a real Deployment mid-update: one surge pod, not yet available; both old ones serving.
    const mid = await statusOf('Deployment', 'web');
    expect(mid).toMatchObject({ replicas: 3, updatedReplicas: 1, availableReplicas: 2, readyReplicas: 2 });
    expect(condition(mid, 'Progressing')).toMatchObject({ status: 'True', reason: 'ReplicaSetUpdated' });
    expect(condition(mid, 'Available')).toMatchObject({ status: 'True', reason: 'MinimumReplicasAvailable' });
    expect(pods('web').filter((p) => p.spec.containers[0].image === 'img:2')[0]?.status.containerStatuses[0].state).toEqual({
      waiting: { reason: 'ContainerCreating' },
    });
    let maxPods = 0;
    for (let pass = 0; pass < 8; pass += 1) {
      standIn.reconcile();
      maxPods = Math.max(maxPods, pods('web').length);
      const available = pods('web').filter((p) => p.status.conditions.some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True'));
      expect(available.length).toBeGreaterThanOrEqual(2); // maxUnavailable 0
    }
    expect(maxPods).toBe(3); // maxSurge 1
    const done = await statusOf('Deployment', 'web');
    expect(done).toMatchObject({ replicas: 2, updatedReplicas: 2, availableReplicas: 2 });
    expect(condition(done, 'Progressing')).toMatchObject({ reason: 'NewReplicaSetAvailable' });
  });

  it('a StatefulSet replaces its pod one step at a time: updateRevision moves first, currentRevision only once the new pod is ready', async () => {
    const set = (image: string): K8sObject => ({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'db', namespace: 'sim' },
      spec: {
        replicas: 1,
        serviceName: 'db',
        selector: { matchLabels: { app: 'db' } },
        template: { metadata: { labels: { app: 'db' } }, spec: { containers: [{ name: 'pg', image }] } },
      },
    });
    await cluster.apply(set('pg:1'));
    standIn.reconcileTimes(3);
    const before = await statusOf('StatefulSet', 'db');
    expect(before.currentRevision).toBe(before.updateRevision);
    await cluster.apply(set('pg:2'));
    standIn.reconcile();
    const mid = await statusOf('StatefulSet', 'db');
    // The old pod was ready a moment ago and readyReplicas may still say 1: the revisions tell.
    expect(mid.updateRevision).not.toBe(before.updateRevision);
    expect(mid.currentRevision).toBe(before.currentRevision);
    standIn.reconcileTimes(3);
    const after = await statusOf('StatefulSet', 'db');
    expect(after).toMatchObject({ currentRevision: mid.updateRevision, updateRevision: mid.updateRevision, readyReplicas: 1, updatedReplicas: 1 });
  });

  it('pods that crash-loop (restartCount growing each pass), fail to pull, have an invalid image name, or fail their configuration (a missing Secret)', async () => {
    standIn.imageFate = (image) =>
      image === 'crash'
        ? { pull: 'crash', message: 'connection refused: postgres' }
        : image === 'nopull'
          ? { pull: 'fail', reason: 'ErrImagePull', message: 'pull access denied' }
          : image === 'Bad:Name'
            ? { pull: 'fail', reason: 'InvalidImageName', message: 'couldn\'t parse image reference "Bad:Name"' }
            : { pull: 'ok' };
    await cluster.apply(deployment('crash', 'crash'));
    await cluster.apply(deployment('nopull', 'nopull'));
    await cluster.apply(deployment('badname', 'Bad:Name'));
    await cluster.apply(deployment('noconf', 'ok', { podSpec: { containers: [{ name: 'main', image: 'ok', envFrom: [{ secretRef: { name: 'absent' } }] }] } }));
    standIn.reconcileTimes(4);
    const waiting = (prefix: string) => pods(prefix)[0]?.status.containerStatuses[0];
    expect(waiting('crash')).toMatchObject({ restartCount: 3, state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 1 } } });
    expect(waiting('nopull').state.waiting.reason).toBe('ImagePullBackOff');
    expect(waiting('badname').state.waiting.reason).toBe('InvalidImageName');
    expect(waiting('noconf').state.waiting).toEqual({ reason: 'CreateContainerConfigError', message: 'secret "absent" not found' });
    standIn.imageFate = () => ({ pull: 'ok' });
  });

  it('no pod is created where admission refuses it: ReplicaFailure / FailedCreate for Pod Security restricted and for a missing service account; Unschedulable pods stay Pending', async () => {
    await cluster.apply(deployment('loose', 'ok', { ns: 'locked' }));
    await cluster.apply(deployment('nosa', 'ok', { podSpec: { serviceAccountName: 'robot' } }));
    standIn.reconcileTimes(2);
    expect(pods('loose', 'locked')).toEqual([]);
    expect(condition(await statusOf('Deployment', 'loose', 'locked'), 'ReplicaFailure')).toMatchObject({
      status: 'True',
      reason: 'FailedCreate',
      message: expect.stringContaining('violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false'),
    });
    expect(condition(await statusOf('Deployment', 'nosa'), 'ReplicaFailure')).toMatchObject({
      reason: 'FailedCreate',
      message: expect.stringContaining('error looking up service account sim/robot: serviceaccount "robot" not found'),
    });

    const restricted = {
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{ name: 'main', image: 'ok', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
    };
    await cluster.apply(deployment('tight', 'ok', { ns: 'locked', podSpec: restricted }));
    standIn.reconcileTimes(3);
    expect(await statusOf('Deployment', 'tight', 'locked')).toMatchObject({ availableReplicas: 1 });

    standIn.unschedulable = (spec) => (spec.containers[0].image === 'huge' ? '0/3 nodes are available: 3 Insufficient cpu.' : null);
    await cluster.apply(deployment('huge', 'huge'));
    standIn.reconcileTimes(3);
    expect(pods('huge')[0]?.status).toMatchObject({ phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }] });
    standIn.unschedulable = () => null;
  });

  it('server-side apply: lists merge by key between managers, a field an applier drops goes, and the HPA’s scale writes are owned by kube-controller-manager', async () => {
    const api = (manager: string, body: K8sObject, force = true) =>
      objects.patch(structuredClone(body), undefined, undefined, manager, force, PatchStrategy.ServerSideApply);
    const mine = deployment('merge', 'app:1');
    (mine.spec as any).template.spec.containers[0].env = [
      { name: 'A', value: '1' },
      { name: 'B', value: '2' },
    ];
    await api(FIELD_MANAGER, mine);
    // Another manager (a sidecar injector) applies only its container into the same list.
    await api('injector', {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'merge', namespace: 'sim' },
      spec: { selector: { matchLabels: { app: 'merge' } }, template: { spec: { containers: [{ name: 'proxy', image: 'proxy:1' }] } } },
    } as K8sObject);
    (mine.spec as any).template.spec.containers[0].env = [{ name: 'A', value: '1' }];
    await api(FIELD_MANAGER, mine);
    const stored = standIn.get('Deployment', 'sim', 'merge')!;
    expect(stored.spec.template.spec.containers.map((c: { name: string }) => c.name)).toEqual(['main', 'proxy']);
    expect(stored.spec.template.spec.containers[0].env).toEqual([{ name: 'A', value: '1' }]);

    // A different value for a field another manager owns, unforced: a conflict naming it.
    const conflict = await api('someone', { ...deployment('merge', 'app:2') }, false).catch((e: { code: number; body: string }) => e);
    expect((conflict as { code: number }).code).toBe(409);

    const hpa: K8sObject = {
      apiVersion: 'autoscaling/v2',
      kind: 'HorizontalPodAutoscaler',
      metadata: { name: 'merge', namespace: 'sim' },
      spec: { scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'merge' }, minReplicas: 1, maxReplicas: 5 },
    };
    await cluster.apply(hpa);
    const generation = standIn.get('Deployment', 'sim', 'merge')!.metadata.generation as number;
    standIn.autoscale('sim', 'merge', 4);
    const scaled = standIn.get('Deployment', 'sim', 'merge')!;
    expect(scaled.spec.replicas).toBe(4);
    expect(scaled.metadata.generation).toBe(generation + 1);
    expect(fieldsOwnedBy(scaled as never, 'kube-controller-manager')).toEqual(['.spec.replicas']);
    expect(fieldsOwnedBy(scaled as never, FIELD_MANAGER)).not.toContain('.spec.replicas');
  });

  it("the rollout rule against a real rollout's middle step: not DEPLOYED while the new pod is still ContainerCreating (issue 38: the agent answered ready here)", async () => {
    await cluster.apply(deployment('early', 'img:1', { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }));
    standIn.reconcileTimes(3);
    const next = deployment('early', 'img:broken', { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } });
    next.metadata.labels = { ...next.metadata.labels, 'agent-control-plane/revision-id': 'r2' };
    await cluster.apply(next);
    standIn.reconcile();
    // replicas 2, updatedReplicas 1, availableReplicas 1: the old pod serves, the new one is being created.
    expect(await statusOf('Deployment', 'early')).toMatchObject({ replicas: 2, updatedReplicas: 1, availableReplicas: 1 });
    const outcome = await watchRollout(cluster, [next], 'r2', { pollMs: 10, deadlineMs: 100, signal: new AbortController().signal, onProgress: () => {} });
    expect(outcome.state).not.toBe('ready');
  });
});

describe('re-applying an unchanged revision against the simulated cluster', () => {
  const standIn = new KubernetesApiStandIn(['team-a']);
  let cluster: Cluster;

  beforeAll(async () => {
    await standIn.start();
    standIn.grant('t', { namespaces: ['team-a'] });
    const config = new KubeConfig();
    config.loadFromFile(standIn.kubeconfig('t'));
    cluster = new Cluster(config);
  });
  afterAll(() => standIn.stop());

  it('changes no object’s generation, resourceVersion or managedFields, also after the HPA scaled the Deployment (the agent applies the count it chose)', async () => {
    const deployment = { id: '3c2b1a00-7f0e-4b7e-9a39-0d5b0a1f2c3d', name: 'steady' };
    const render = (liveReplicas?: number) =>
      renderRevision({
        deployment,
        revision: { id: 'rev-steady', image: 'img:1', secrets: [{ name: 'LANGSMITH_API_KEY', value: 'ls' }] },
        namespace: 'team-a',
        spec: { min_scale: 1, max_scale: 5, cpu: 0.5, labels: { team: 'a' } },
        postgresPassword: 'pw',
        redisPassword: 'rpw',
        ...(liveReplicas ? { liveReplicas: { apiServer: liveReplicas } } : {}),
      });
    for (const object of render()) await cluster.apply(object);
    standIn.reconcileTimes(4);
    const snapshot = () =>
      new Map(
        standIn
          .all()
          .filter((o) => o.kind !== 'Pod' && o.kind !== 'PersistentVolumeClaim')
          .map((o) => [
            `${o.kind}/${o.metadata.name}`,
            { generation: o.metadata.generation, resourceVersion: o.metadata.resourceVersion, managedFields: o.metadata.managedFields },
          ]),
      );
    const before = snapshot();
    for (const object of render()) await cluster.apply(object);
    expect(snapshot()).toEqual(before);

    standIn.autoscale('team-a', 'steady-3c2b1a00-api-server', 3);
    standIn.reconcileTimes(3);
    const scaled = snapshot();
    // What the agent renders after reading the live count back (K8sAgent #live): no generation moves.
    // The first re-apply records that the agent shares spec.replicas (same value) with the HPA's
    // manager, as a real server does; from then on nothing changes at all.
    for (const object of render(3)) await cluster.apply(object);
    const generations = (m: ReturnType<typeof snapshot>) => [...m].map(([k, v]) => [k, v.generation]);
    expect(generations(snapshot())).toEqual(generations(scaled));
    const settled = snapshot();
    for (const object of render(3)) await cluster.apply(object);
    expect(snapshot()).toEqual(settled);
    const apiServer = standIn.get('Deployment', 'team-a', 'steady-3c2b1a00-api-server')!;
    expect(apiServer.spec.replicas).toBe(3);
    // Both own spec.replicas now, with the same value: neither's write is undone by the other.
    expect(fieldsOwnedBy(apiServer as never, 'kube-controller-manager')).toEqual(['.spec.replicas']);
  });
});

describe('pruning against the simulated cluster', () => {
  const standIn = new KubernetesApiStandIn(['team-a']);
  let cluster: Cluster;
  const deployment = { id: '4d3c2b1a-7f0e-4b7e-9a39-0d5b0a1f2c3d', name: 'prune' };
  const render = (revisionId: string, spec: Record<string, unknown>) =>
    renderRevision({
      deployment,
      revision: { id: revisionId, image: 'img:1', secrets: [] },
      namespace: 'team-a',
      spec,
      postgresPassword: 'pw',
      redisPassword: 'rpw',
    });

  beforeAll(async () => {
    await standIn.start();
    standIn.grant('t', { namespaces: ['team-a'] });
    const config = new KubeConfig();
    config.loadFromFile(standIn.kubeconfig('t'));
    cluster = new Cluster(config);
  });
  afterAll(() => standIn.stop());

  it('deletes only what the live revision no longer renders and other revisions’ env Secrets, never PostgreSQL or its Secret; stops once a newer revision is live', async () => {
    for (const object of render('rev-aaaaaaaa', { min_scale: 1, max_scale: 3, cpu: 1 })) await cluster.apply(object);
    const second = render('rev-bbbbbbbb', { min_scale: 1, max_scale: 1, cpu: 1 });
    for (const object of second) await cluster.apply(object);
    const deleted = await pruneEarlier(cluster, 'team-a', deployment.id, 'rev-bbbbbbbb', second, new AbortController().signal);
    expect(deleted).toEqual([
      'HorizontalPodAutoscaler prune-4d3c2b1a-api-server',
      'HorizontalPodAutoscaler prune-4d3c2b1a-queue',
      "other revisions' env Secrets",
    ]);
    expect(
      standIn
        .objects('Secret', 'team-a')
        .map((s) => s.metadata.name)
        .sort(),
    ).toEqual(['prune-4d3c2b1a-env-rev-bbbb', 'prune-4d3c2b1a-postgres']);
    expect(standIn.get('StatefulSet', 'team-a', 'prune-4d3c2b1a-postgres')).toBeDefined();

    // An interrupted agent pruning for rev-b after rev-c has applied: it deletes nothing of rev-c's.
    const third = render('rev-cccccccc', { min_scale: 1, max_scale: 3, cpu: 1 });
    for (const object of third) await cluster.apply(object);
    await expect(pruneEarlier(cluster, 'team-a', deployment.id, 'rev-bbbbbbbb', second, new AbortController().signal)).rejects.toBeInstanceOf(Superseded);
    expect(standIn.objects('HorizontalPodAutoscaler', 'team-a')).toHaveLength(2);
    expect(standIn.objects('Secret', 'team-a').map((s) => s.metadata.name)).toContain('prune-4d3c2b1a-env-rev-cccc');
  });
});
