import { describe, expect, it } from 'vitest';
import { LABELS } from '../../agent/k8s/labels.ts';
import { type RenderInput, renderRevision } from '../../agent/k8s/render.ts';
import { schemaErrors } from '../../agent/k8s/schemas.ts';
import type { ResourceSpec } from '../../shared/schemas/resource-spec.ts';

/**
 * The renderer alone (no cluster, no stand-in): golden objects checked field by field against
 * contract §14 and the seed's ResourceSpec defaults, and every object against the Kubernetes schemas.
 */
const DEPLOYMENT = { id: '0b8c3f5e-1111-4222-8333-444455556666', name: 'Support Bot' };
const REVISION = {
  id: '9f1e2d3c-aaaa-4bbb-8ccc-dddddddddddd',
  image: 'registry.example.com/acme/bot:1.2.3',
  secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-secret' }],
};
const BASE = 'support-bot-0b8c3f5e';

/** Every field the seed's ResourceSpec has that §14 renders, requests only (the limits come from the defaults). */
const FULL: ResourceSpec = {
  min_scale: 2,
  max_scale: 5,
  cpu: 1,
  memory_mb: 1024,
  queue_cpu: 0.5,
  redis_memory_mb: 256,
  labels: { team: 'acme', tier: 'gold' },
  annotations: { 'acme.example.com/owner': 'ops' },
  service_account_name: 'bot-runner',
  image_pull_secrets: [{ name: 'regcred' }],
  volumes: [
    { name: 'cache', emptyDir: { sizeLimit: '1Gi' } },
    { name: 'config', configMap: { name: 'bot-config' } },
  ],
  volume_mounts: [
    { name: 'cache', mountPath: '/cache' },
    { name: 'config', mountPath: '/etc/bot', readOnly: true },
  ],
  init_containers: [{ name: 'migrate', image: 'registry.example.com/acme/migrate:1', command: ['./migrate'], env: [{ name: 'MODE', value: 'up' }] }],
  sidecars: [
    { name: 'log-shipper', image: 'registry.example.com/acme/shipper:2', restartPolicy: 'Always' },
    {
      name: 'metrics',
      image: 'registry.example.com/acme/metrics:3',
      env: [{ name: 'POD', value: '', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
      volumeMounts: [{ name: 'cache', mountPath: '/cache', readOnly: true }],
    },
  ],
  db_cpu: 0.25,
  db_memory_mb: 512,
  db_storage_gi: 20,
  db_max_connections: 200,
  orchestrator_cpu: 4,
  executor_memory_mb: 4096,
};

const input = (spec: ResourceSpec | null): RenderInput => ({
  deployment: DEPLOYMENT,
  revision: REVISION,
  namespace: 'team-a',
  spec,
  postgresPassword: 'p@ss/word',
  redisPassword: 'r3d!s',
});
const find = (objects: ReturnType<typeof renderRevision>, kind: string, name: string) => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${objects.map((o) => `${o.kind} ${o.metadata.name}`).join(', ')}`);
  return found as any;
};

describe('renderRevision: a full ResourceSpec', () => {
  const objects = renderRevision(input(FULL));

  it('renders exactly the objects §14 names, each schema-valid, in the namespace', () => {
    expect(objects.map((o) => `${o.apiVersion} ${o.kind} ${o.metadata.name}`).sort()).toEqual(
      [
        `v1 Secret ${BASE}-env-9f1e2d3c`,
        `apps/v1 Deployment ${BASE}-api-server`,
        `v1 Service ${BASE}-api-server`,
        `autoscaling/v2 HorizontalPodAutoscaler ${BASE}-api-server`,
        `apps/v1 Deployment ${BASE}-queue`,
        `autoscaling/v2 HorizontalPodAutoscaler ${BASE}-queue`,
        `apps/v1 Deployment ${BASE}-redis`,
        `v1 Service ${BASE}-redis`,
        `v1 Secret ${BASE}-postgres`,
        `apps/v1 StatefulSet ${BASE}-postgres`,
        `v1 Service ${BASE}-postgres`,
        `networking.k8s.io/v1 NetworkPolicy ${BASE}-redis`,
        `networking.k8s.io/v1 NetworkPolicy ${BASE}-postgres`,
      ].sort(),
    );
    for (const object of objects) {
      expect(schemaErrors(object), `${object.kind} ${object.metadata.name}`).toBeNull();
      expect(object.metadata.namespace).toBe('team-a');
    }
  });

  it("puts the §14 labels, the spec's labels and its annotations on every object", () => {
    const components: Record<string, string> = {
      'env-9f1e2d3c': 'api-server',
      'api-server': 'api-server',
      queue: 'queue',
      redis: 'redis',
      postgres: 'postgres',
    };
    for (const object of objects) {
      const component = components[object.metadata.name.slice(BASE.length + 1)];
      expect(object.metadata.labels, `${object.kind} ${object.metadata.name}`).toEqual({
        team: 'acme',
        tier: 'gold',
        'app.kubernetes.io/managed-by': 'agent-control-plane',
        'app.kubernetes.io/component': component,
        'agent-control-plane/deployment-id': DEPLOYMENT.id,
        'agent-control-plane/revision-id': REVISION.id,
      });
      expect(object.metadata.annotations).toEqual({ 'acme.example.com/owner': 'ops' });
    }
  });

  it("the Secret holds the deployment's secrets and the connection strings of its Redis and PostgreSQL", () => {
    // One per revision (its id's first 8 characters): a restarting older pod keeps reading its own.
    const secret = find(objects, 'Secret', `${BASE}-env-9f1e2d3c`);
    const data = Object.fromEntries(Object.entries(secret.data as Record<string, string>).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
    expect(data).toEqual({
      OPENAI_API_KEY: 'sk-secret',
      REDIS_URI: `redis://:r3d!s@${BASE}-redis.team-a.svc:6379`,
      DATABASE_URI: `postgres://postgres:p%40ss%2Fword@${BASE}-postgres.team-a.svc:5432/postgres?sslmode=disable`,
      POSTGRES_URI: `postgres://postgres:p%40ss%2Fword@${BASE}-postgres.team-a.svc:5432/postgres?sslmode=disable`,
    });
    expect(secret.type).toBe('Opaque');
  });

  it('the API server Deployment: image, env from the Secret, requests and 2 × limits, pod settings, volumes, init containers, sidecars, /ok readiness, maxUnavailable 0', () => {
    const deployment = find(objects, 'Deployment', `${BASE}-api-server`);
    // min_scale for a new deployment; an HPA scales it from there (max_scale 5 > min_scale 2).
    expect(deployment.spec.replicas).toBe(2);
    expect(deployment.spec.selector).toEqual({ matchLabels: { [LABELS.deploymentId]: DEPLOYMENT.id, [LABELS.component]: 'api-server' } });
    expect(deployment.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    const pod = deployment.spec.template;
    expect(pod.metadata.labels).toMatchObject({ ...deployment.spec.selector.matchLabels, [LABELS.revisionId]: REVISION.id, team: 'acme' });
    const restricted = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };
    const probe = { httpGet: { path: '/ok', port: 8000 }, periodSeconds: 10, timeoutSeconds: 1, failureThreshold: 6 };
    const waitFor = [
      {
        name: 'wait-for-postgres',
        image: 'pgvector/pgvector:pg16',
        command: ['sh', '-c', `until pg_isready -h ${BASE}-postgres.team-a.svc -p 5432 -U postgres; do sleep 2; done`],
        securityContext: restricted,
      },
      {
        name: 'wait-for-redis',
        image: 'redis:7-alpine',
        command: ['sh', '-c', `until redis-cli -h ${BASE}-redis.team-a.svc -p 6379 ping | grep -q PONG; do sleep 2; done`],
        env: [{ name: 'REDISCLI_AUTH', valueFrom: { secretKeyRef: { name: `${BASE}-postgres`, key: 'REDIS_PASSWORD' } } }],
        securityContext: restricted,
      },
    ];
    expect(pod.spec).toEqual({
      serviceAccountName: 'bot-runner',
      imagePullSecrets: [{ name: 'regcred' }],
      enableServiceLinks: false,
      // Pod Security restricted: non-root, RuntimeDefault seccomp.
      securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      volumes: [
        { name: 'cache', emptyDir: { sizeLimit: '1Gi' } },
        { name: 'config', configMap: { name: 'bot-config' } },
      ],
      initContainers: [
        ...waitFor,
        {
          name: 'migrate',
          image: 'registry.example.com/acme/migrate:1',
          command: ['./migrate'],
          env: [{ name: 'MODE', value: 'up' }],
          securityContext: restricted,
        },
        // restartPolicy Always: a native sidecar, started with the init containers and kept running.
        { name: 'log-shipper', image: 'registry.example.com/acme/shipper:2', restartPolicy: 'Always', securityContext: restricted },
      ],
      containers: [
        {
          name: 'api-server',
          image: REVISION.image,
          ports: [{ name: 'http', containerPort: 8000, protocol: 'TCP' }],
          envFrom: [{ secretRef: { name: `${BASE}-env-9f1e2d3c` } }],
          // The queue runs the background jobs; the API server none (the official chart with its queue enabled).
          env: [
            { name: 'PORT', value: '8000' },
            { name: 'N_JOBS_PER_WORKER', value: '0' },
          ],
          resources: { requests: { cpu: '1', memory: '1024Mi' }, limits: { cpu: '2', memory: '2048Mi' } },
          volumeMounts: [
            { name: 'cache', mountPath: '/cache' },
            { name: 'config', mountPath: '/etc/bot', readOnly: true },
          ],
          startupProbe: probe,
          readinessProbe: probe,
          livenessProbe: probe,
          securityContext: restricted,
        },
        // An empty value beside valueFrom is "not given" (the seed's default): left out.
        {
          name: 'metrics',
          image: 'registry.example.com/acme/metrics:3',
          env: [{ name: 'POD', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
          volumeMounts: [{ name: 'cache', mountPath: '/cache', readOnly: true }],
          securityContext: restricted,
        },
      ],
    });
  });

  it('its Service and HorizontalPodAutoscaler (min_scale..max_scale)', () => {
    expect(find(objects, 'Service', `${BASE}-api-server`).spec).toEqual({
      type: 'ClusterIP',
      selector: { [LABELS.deploymentId]: DEPLOYMENT.id, [LABELS.component]: 'api-server' },
      ports: [{ name: 'http', port: 8000, targetPort: 'http', protocol: 'TCP' }],
    });
    expect(find(objects, 'HorizontalPodAutoscaler', `${BASE}-api-server`).spec).toEqual({
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: `${BASE}-api-server` },
      minReplicas: 2,
      maxReplicas: 5,
      // The API container's own CPU: a sidecar without a request does not break the metric.
      metrics: [
        { type: 'ContainerResource', containerResource: { name: 'cpu', container: 'api-server', target: { type: 'Utilization', averageUtilization: 80 } } },
      ],
    });
  });

  it("the queue: its own cpu request with 2 × limit, memory and scale defaulted from the API server's", () => {
    const queue = find(objects, 'Deployment', `${BASE}-queue`);
    expect(queue.spec.replicas).toBe(2);
    expect(queue.spec.strategy.rollingUpdate).toEqual({ maxUnavailable: 0, maxSurge: 1 });
    const [container, ...others] = queue.spec.template.spec.containers;
    expect(others).toEqual([]);
    const probe = { httpGet: { path: '/ok', port: 8000 }, periodSeconds: 10, timeoutSeconds: 1, failureThreshold: 6 };
    expect(container).toEqual({
      name: 'queue',
      image: REVISION.image,
      // The official chart's queue command (charts/langgraph-cloud/templates/queue/deployment.yaml), with its jobs per worker.
      command: ['/storage/queue_entrypoint.sh'],
      envFrom: [{ secretRef: { name: `${BASE}-env-9f1e2d3c` } }],
      env: [
        { name: 'PORT', value: '8000' },
        { name: 'N_JOBS_PER_WORKER', value: '10' },
      ],
      // queue_cpu 0.5 → limit 2 × 0.5; queue_memory_mb = memory_mb 1024 → limit 2048.
      resources: { requests: { cpu: '500m', memory: '1024Mi' }, limits: { cpu: '1', memory: '2048Mi' } },
      startupProbe: probe,
      readinessProbe: probe,
      livenessProbe: probe,
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    });
    expect(queue.spec.template.spec.initContainers.map((c: { name: string }) => c.name)).toEqual(['wait-for-postgres', 'wait-for-redis']);
    expect(queue.spec.template.spec.serviceAccountName).toBe('bot-runner');
    expect(queue.spec.template.spec.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    // queue_min_scale / queue_max_scale default to min_scale / max_scale.
    expect(find(objects, 'HorizontalPodAutoscaler', `${BASE}-queue`).spec).toMatchObject({
      minReplicas: 2,
      maxReplicas: 5,
      scaleTargetRef: { name: `${BASE}-queue` },
    });
  });

  it('Redis: a password, redis_memory_mb as its memory, restricted, a Service, a pod template without the revision or the spec’s labels (neither restarts it)', () => {
    const redis = find(objects, 'Deployment', `${BASE}-redis`);
    expect(redis.spec).toEqual({
      replicas: 1,
      selector: { matchLabels: { [LABELS.deploymentId]: DEPLOYMENT.id, [LABELS.component]: 'redis' } },
      strategy: { type: 'Recreate' },
      template: {
        metadata: { labels: { [LABELS.managedBy]: 'agent-control-plane', [LABELS.component]: 'redis', [LABELS.deploymentId]: DEPLOYMENT.id } },
        spec: {
          enableServiceLinks: false,
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: 999, runAsGroup: 999, fsGroup: 999, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'redis',
              image: 'redis:7-alpine',
              args: ['--requirepass', '$(REDIS_PASSWORD)', '--save', '', '--appendonly', 'no', '--maxmemory', '204mb'],
              env: [{ name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: `${BASE}-postgres`, key: 'REDIS_PASSWORD' } } }],
              ports: [{ name: 'redis', containerPort: 6379, protocol: 'TCP' }],
              resources: { requests: { memory: '256Mi' }, limits: { memory: '256Mi' } },
              readinessProbe: { tcpSocket: { port: 'redis' }, periodSeconds: 5 },
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            },
          ],
        },
      },
    });
    expect(find(objects, 'Service', `${BASE}-redis`).spec.ports).toEqual([{ name: 'redis', port: 6379, targetPort: 'redis', protocol: 'TCP' }]);
  });

  it('PostgreSQL: a StatefulSet with a db_storage_gi claim, db_max_connections, db requests and 2 × limits, its password from its Secret, a headless Service', () => {
    const set = find(objects, 'StatefulSet', `${BASE}-postgres`);
    expect(set.spec.replicas).toBe(1);
    expect(set.spec.serviceName).toBe(`${BASE}-postgres`);
    const container = set.spec.template.spec.containers[0];
    expect(container.args).toEqual(['-c', 'max_connections=200']);
    expect(container.resources).toEqual({ requests: { cpu: '250m', memory: '512Mi' }, limits: { cpu: '500m', memory: '1024Mi' } });
    expect(container.env).toContainEqual({ name: 'POSTGRES_PASSWORD', valueFrom: { secretKeyRef: { name: `${BASE}-postgres`, key: 'POSTGRES_PASSWORD' } } });
    expect(container.volumeMounts).toEqual([{ name: 'data', mountPath: '/var/lib/postgresql/data' }]);
    expect(set.spec.volumeClaimTemplates).toEqual([
      {
        metadata: { name: 'data', labels: { [LABELS.managedBy]: 'agent-control-plane', [LABELS.component]: 'postgres', [LABELS.deploymentId]: DEPLOYMENT.id } },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '20Gi' } } },
      },
    ]);
    expect(Buffer.from(find(objects, 'Secret', `${BASE}-postgres`).data.POSTGRES_PASSWORD, 'base64').toString()).toBe('p@ss/word');
    expect(Buffer.from(find(objects, 'Secret', `${BASE}-postgres`).data.REDIS_PASSWORD, 'base64').toString()).toBe('r3d!s');
    expect(find(objects, 'Service', `${BASE}-postgres`).spec.clusterIP).toBe('None');
    // pgvector (the official chart's PostgreSQL image), restricted, its pod template free of the spec's labels.
    expect(container.image).toBe('pgvector/pgvector:pg16');
    expect(container.securityContext).toEqual({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(set.spec.template.metadata).toEqual({
      labels: { [LABELS.managedBy]: 'agent-control-plane', [LABELS.component]: 'postgres', [LABELS.deploymentId]: DEPLOYMENT.id },
    });
    expect(set.spec.template.spec.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 999,
      runAsGroup: 999,
      fsGroup: 999,
      seccompProfile: { type: 'RuntimeDefault' },
    });
  });

  it('a NetworkPolicy for each data store: only the deployment’s own pods reach it, on its port', () => {
    for (const [component, port] of [
      ['redis', 6379],
      ['postgres', 5432],
    ] as const) {
      expect(find(objects, 'NetworkPolicy', `${BASE}-${component}`).spec).toEqual({
        podSelector: { matchLabels: { [LABELS.deploymentId]: DEPLOYMENT.id, [LABELS.component]: component } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ podSelector: { matchLabels: { [LABELS.deploymentId]: DEPLOYMENT.id } } }], ports: [{ protocol: 'TCP', port }] }],
      });
    }
  });

  it('with an autoscaler, a new revision keeps the replica count it chose (within min..max), so an apply does not scale down', () => {
    const again = renderRevision({ ...input(FULL), liveReplicas: { apiServer: 4, queue: 9 } });
    expect(find(again, 'Deployment', `${BASE}-api-server`).spec.replicas).toBe(4);
    expect(find(again, 'Deployment', `${BASE}-queue`).spec.replicas).toBe(5);
    // Without an autoscaler the count is min_scale, whatever runs now.
    const fixed = renderRevision({ ...input({ min_scale: 3, max_scale: 3 }), liveReplicas: { apiServer: 7 } });
    expect(find(fixed, 'Deployment', `${BASE}-api-server`).spec.replicas).toBe(3);
  });

  it('ignores the orchestrator_* and executor_* fields (accepted and unused)', () => {
    const text = JSON.stringify(objects);
    expect(text).not.toContain('4096');
    expect(renderRevision(input({ ...FULL, orchestrator_cpu: null, executor_memory_mb: null }))).toEqual(objects);
  });

  it('is pure: the same input renders the same objects, and the input is not changed', () => {
    const before = structuredClone(FULL);
    expect(renderRevision(input(FULL))).toEqual(objects);
    expect(FULL).toEqual(before);
  });
});

describe('renderRevision: defaults', () => {
  it('an empty spec: one replica of each, no autoscaler, no requests or limits, 10 GiB for PostgreSQL, its default connections', () => {
    const objects = renderRevision(input(null));
    expect(objects.filter((o) => o.kind === 'HorizontalPodAutoscaler')).toEqual([]);
    expect(find(objects, 'Deployment', `${BASE}-api-server`).spec.replicas).toBe(1);
    expect(find(objects, 'Deployment', `${BASE}-queue`).spec.replicas).toBe(1);
    expect(find(objects, 'Deployment', `${BASE}-api-server`).spec.template.spec.containers[0].resources).toBeUndefined();
    expect(find(objects, 'StatefulSet', `${BASE}-postgres`).spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe('10Gi');
    expect(find(objects, 'StatefulSet', `${BASE}-postgres`).spec.template.spec.containers[0].args).toEqual([]);
    for (const object of objects) expect(schemaErrors(object)).toBeNull();
  });

  it('max_scale equal to min_scale: replicas = min_scale and no autoscaler; explicit limits win over 2 × request', () => {
    const objects = renderRevision(
      input({ min_scale: 3, max_scale: 3, cpu: 2, cpu_limit: 3, memory_mb: 100, queue_min_scale: 1, queue_max_scale: 1, db_cpu: 1, db_cpu_limit: 1.5 }),
    );
    expect(objects.filter((o) => o.kind === 'HorizontalPodAutoscaler')).toEqual([]);
    const api = find(objects, 'Deployment', `${BASE}-api-server`);
    expect(api.spec.replicas).toBe(3);
    expect(api.spec.template.spec.containers[0].resources).toEqual({ requests: { cpu: '2', memory: '100Mi' }, limits: { cpu: '3', memory: '200Mi' } });
    const queue = find(objects, 'Deployment', `${BASE}-queue`);
    expect(queue.spec.replicas).toBe(1);
    // queue_cpu = cpu 2, and its limit 2 × queue_cpu (not the API server's explicit cpu_limit).
    expect(queue.spec.template.spec.containers[0].resources).toEqual({ requests: { cpu: '2', memory: '100Mi' }, limits: { cpu: '4', memory: '200Mi' } });
    expect(find(objects, 'StatefulSet', `${BASE}-postgres`).spec.template.spec.containers[0].resources).toEqual({
      requests: { cpu: '1' },
      limits: { cpu: '1500m' },
    });
  });

  it('object names stay DNS labels of at most 63 characters for any deployment name, and start with a letter', () => {
    for (const name of ['x'.repeat(200), '123 numbers first', '---', 'Ünïcödé Bot!']) {
      for (const object of renderRevision({ ...input(null), deployment: { id: DEPLOYMENT.id, name } })) {
        expect(object.metadata.name).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
        // The longest name Kubernetes derives: the claim data-<set>-0 of the StatefulSet.
        expect(`data-${object.metadata.name}-0`.length).toBeLessThanOrEqual(63);
        expect(schemaErrors(object)).toBeNull();
      }
    }
  });
});

describe('renderRevision: contract §18', () => {
  it('min_scale 0 is deployed with 1 (also the queue); an autoscaler only with a CPU request on its container', () => {
    const zero = renderRevision(input({ min_scale: 0, max_scale: 0, queue_min_scale: 0 }));
    expect(find(zero, 'Deployment', `${BASE}-api-server`).spec.replicas).toBe(1);
    expect(find(zero, 'Deployment', `${BASE}-queue`).spec.replicas).toBe(1);
    const noCpu = renderRevision({ ...input({ min_scale: 1, max_scale: 4 }), liveReplicas: { apiServer: 3, queue: 3 } });
    expect(noCpu.filter((o) => o.kind === 'HorizontalPodAutoscaler')).toEqual([]);
    // No autoscaler: the count is min_scale, whatever ran before (an autoscaler that is gone chose it).
    expect(find(noCpu, 'Deployment', `${BASE}-api-server`).spec.replicas).toBe(1);
    expect(find(noCpu, 'Deployment', `${BASE}-queue`).spec.replicas).toBe(1);
    const withCpu = renderRevision(input({ min_scale: 1, max_scale: 4, cpu: 0.5 }));
    expect(withCpu.filter((o) => o.kind === 'HorizontalPodAutoscaler').map((o) => o.metadata.name)).toEqual([`${BASE}-api-server`, `${BASE}-queue`]);
  });

  it("the listener's license Secret reaches both containers (optional keys), unless the deployment carries its own key", () => {
    const licensed = renderRevision({ ...input(null), licenseSecret: 'langgraph-license' });
    const expected = ['LANGGRAPH_CLOUD_LICENSE_KEY', 'LANGSMITH_API_KEY'].map((name) => ({
      name,
      valueFrom: { secretKeyRef: { name: 'langgraph-license', key: name, optional: true } },
    }));
    for (const name of ['api-server', 'queue']) {
      expect(find(licensed, 'Deployment', `${BASE}-${name}`).spec.template.spec.containers[0].env.slice(2)).toEqual(expected);
    }
    const own = renderRevision({
      ...input(null),
      revision: { ...REVISION, secrets: [{ name: 'LANGSMITH_API_KEY', value: 'ls' }] },
      licenseSecret: 'langgraph-license',
    });
    expect(find(own, 'Deployment', `${BASE}-api-server`).spec.template.spec.containers[0].env).toHaveLength(2);
  });

  it("a container's own securityContext is kept (over the restricted defaults) only where the listener allows it", () => {
    const spec: ResourceSpec = { sidecars: [{ name: 'vpn', image: 'vpn:1', securityContext: { capabilities: { add: ['NET_ADMIN'] } } }] };
    const sidecar = (allowPrivileged: boolean) =>
      find(renderRevision({ ...input(spec), allowPrivileged }), 'Deployment', `${BASE}-api-server`).spec.template.spec.containers[1];
    expect(sidecar(false).securityContext).toEqual({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(sidecar(true).securityContext).toEqual({ allowPrivilegeEscalation: false, capabilities: { add: ['NET_ADMIN'] } });
  });

  it('--postgres-image / --redis-image replace the data stores’ images everywhere (also the init containers that wait for them)', () => {
    const text = JSON.stringify(
      renderRevision({ ...input(null), images: { postgres: 'mirror.example.com/pgvector:pg16', redis: 'mirror.example.com/redis:7' } }),
    );
    expect(text).not.toContain('pgvector/pgvector:pg16');
    expect(text).not.toContain('"redis:7-alpine"');
    expect(text.match(/mirror\.example\.com\/pgvector:pg16/g)).toHaveLength(3);
  });

  it("a change of the spec's labels or annotations, or a new revision, leaves Redis's and PostgreSQL's pod templates as they were (no restart)", () => {
    const before = renderRevision(input(FULL));
    const after = renderRevision({
      ...input({ ...FULL, labels: { team: 'other' }, annotations: { note: 'changed' } }),
      revision: { ...REVISION, id: '11111111-2222-4333-8444-555555555555' },
    });
    for (const [kind, name] of [
      ['Deployment', `${BASE}-redis`],
      ['StatefulSet', `${BASE}-postgres`],
    ] as const) {
      expect(find(after, kind, name).spec.template).toEqual(find(before, kind, name).spec.template);
    }
  });

  it('every pod passes the Pod Security restricted checks', async () => {
    const { restrictedViolations } = await import('./api-stand-in.ts');
    for (const workload of renderRevision(input(FULL)).filter((o) => o.kind === 'Deployment' || o.kind === 'StatefulSet')) {
      expect(restrictedViolations((workload.spec as any).template.spec), workload.metadata.name).toEqual([]);
    }
  });
});
