import { type Container, type ResourceSpec, withResourceSpecDefaults } from '../../shared/schemas/resource-spec.ts';
import { baseName, type Component, type K8sObject, LABELS, MANAGED_BY } from './labels.ts';

/** Everything one revision renders from: nothing else is read, so the same input gives the same objects. */
export type RenderInput = {
  deployment: { id: string; name: string };
  revision: { id: string; image: string; secrets: ReadonlyArray<{ name: string; value: string }> };
  namespace: string;
  spec: ResourceSpec | null;
  /**
   * PostgreSQL's and Redis's passwords. They must stay the same across revisions (the data
   * directory keeps the first one), so the agent reads them back from the cluster, or makes them
   * for a new deployment.
   */
  postgresPassword: string;
  redisPassword: string;
  /**
   * The replica counts the cluster runs now, where an autoscaler owns them: applied again as they
   * are (within min..max), so a new revision does not scale a busy deployment back down to its minimum.
   */
  liveReplicas?: { apiServer?: number; queue?: number };
  /** The images of PostgreSQL and Redis (the agent's `--postgres-image` / `--redis-image`, for a mirror). */
  images?: { postgres?: string; redis?: string };
  /** The listener's `k8s_license_secret`: a Secret in the namespace holding the license key, read by the pods. */
  licenseSecret?: string | null;
  /** The listener's `k8s_allow_privileged`: the spec's own `securityContext`s win over the restricted defaults. */
  allowPrivileged?: boolean;
};

/** The images of the parts this control plane runs beside the user's image (the official chart's: pgvector for PostgreSQL). */
export const REDIS_IMAGE = 'redis:7-alpine';
export const POSTGRES_IMAGE = 'pgvector/pgvector:pg16';
/** The port the LangGraph API server image listens on, and its health path (contract §14). */
export const API_PORT = 8000;
export const READINESS_PATH = '/ok';
/** The queue's entrypoint in LangGraph API images, Python and JS alike (the official chart's queue command). */
export const QUEUE_COMMAND = ['/storage/queue_entrypoint.sh'];
/** Background runs per queue worker process (the official chart's `numberOfJobsPerWorker` default). */
export const JOBS_PER_WORKER = 10;
/** Where the seed is silent: one replica, 10 GiB of PostgreSQL storage. */
export const DEFAULT_SCALE = 1;
export const DEFAULT_DB_STORAGE_GI = 10;
/** How long a Deployment may make no progress before Kubernetes reports ProgressDeadlineExceeded. */
export const PROGRESS_DEADLINE_SECONDS = 600;
/** The HorizontalPodAutoscaler's target: average CPU use of the API (or queue) container as a share of its request. */
export const HPA_CPU_UTILIZATION = 80;
/** The users the data stores run as (the images' own `postgres` and `redis` users), and the user's image (any non-root). */
export const POSTGRES_UID = 999;
export const REDIS_UID = 999;
export const APP_UID = 1000;
/** The secret names that let a LangGraph image start (contract §18). */
export const LICENSE_ENV = ['LANGGRAPH_CLOUD_LICENSE_KEY', 'LANGSMITH_API_KEY'] as const;

/** The names of a deployment's objects, derived from its name and id only (stable across revisions). */
export function objectNames(deployment: { id: string; name: string }) {
  const base = baseName(deployment);
  return {
    /** Each revision has its own env Secret: a restarting pod of an older revision reads its own settings. */
    envSecret: (revisionId: string) => `${base}-env-${revisionId.slice(0, 8).toLowerCase()}`,
    /** The name the env Secret had before it was one per revision (teardown still removes it). */
    legacyEnvSecret: `${base}-env`,
    apiServer: `${base}-api-server`,
    queue: `${base}-queue`,
    redis: `${base}-redis`,
    postgres: `${base}-postgres`,
    /** PostgreSQL's and Redis's passwords: never pruned, kept across revisions. */
    postgresSecret: `${base}-postgres`,
  };
}

/** The restricted Pod Security profile, pod level: non-root, the runtime's seccomp profile. */
function podSecurity(uid: number) {
  return { runAsNonRoot: true, runAsUser: uid, runAsGroup: uid, fsGroup: uid, seccompProfile: { type: 'RuntimeDefault' } };
}

/** The restricted Pod Security profile, container level. */
export const CONTAINER_SECURITY = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } as const;

/** Readiness, liveness and startup probes on `/ok` at port 8000 (the official chart's queue probes; its timings). */
function probes() {
  const probe = { httpGet: { path: READINESS_PATH, port: API_PORT }, periodSeconds: 10, timeoutSeconds: 1, failureThreshold: 6 };
  return { startupProbe: probe, readinessProbe: probe, livenessProbe: probe };
}

/**
 * The Kubernetes objects of one revision (contract §14 and §18), with the seed's defaults applied:
 * the revision's env Secret, the API server's Deployment and Service (and its
 * HorizontalPodAutoscaler when `max_scale` > `min_scale` and it has a CPU request), the queue's
 * Deployment (likewise), Redis (Deployment, Service), PostgreSQL (StatefulSet with a volume claim,
 * headless Service), the Secret of their passwords, and a NetworkPolicy for each data store. Every
 * pod meets Pod Security `restricted`. A pure function: no clock, no randomness, no I/O.
 */
export function renderRevision(input: RenderInput): K8sObject[] {
  const spec = withResourceSpecDefaults(input.spec ?? {});
  const names = objectNames(input.deployment);
  const envSecret = names.envSecret(input.revision.id);
  const ns = input.namespace;
  const meta = (name: string, component: Component) => ({ name, namespace: ns, labels: labelsOf(input, spec, component), ...annotationsOf(spec) });
  const postgresImage = input.images?.postgres ?? POSTGRES_IMAGE;
  const redisImage = input.images?.redis ?? REDIS_IMAGE;

  // A LangGraph server needs a replica to serve and a queue worker to run: 0 is deployed as 1.
  const minScale = Math.max(1, spec.min_scale ?? DEFAULT_SCALE);
  const maxScale = Math.max(spec.max_scale ?? minScale, minScale);
  const queueMin = Math.max(1, spec.queue_min_scale ?? minScale);
  const queueMax = Math.max(spec.queue_max_scale ?? queueMin, queueMin);
  // An autoscaler measures CPU against its container's request: without one it could never scale,
  // so there is none, and the count is the minimum.
  const apiAutoscaled = maxScale > minScale && spec.cpu != null;
  const queueAutoscaled = queueMax > queueMin && spec.queue_cpu != null;

  const postgresUser = 'postgres';
  const postgresHost = `${names.postgres}.${ns}.svc`;
  const redisHost = `${names.redis}.${ns}.svc`;
  const databaseUri = `postgres://${postgresUser}:${encodeURIComponent(input.postgresPassword)}@${postgresHost}:5432/postgres?sslmode=disable`;
  const redisUri = `redis://:${encodeURIComponent(input.redisPassword)}@${redisHost}:6379`;
  // The connection strings come first so a deployment secret of the same name (an external database) wins.
  const env: Record<string, string> = { REDIS_URI: redisUri, DATABASE_URI: databaseUri, POSTGRES_URI: databaseUri };
  for (const secret of input.revision.secrets) env[secret.name] = secret.value;

  // The license key from the listener's Secret, unless the deployment carries one of its own.
  const ownLicense = input.revision.secrets.some((s) => (LICENSE_ENV as readonly string[]).includes(s.name));
  const licenseEnv =
    input.licenseSecret && !ownLicense
      ? LICENSE_ENV.map((name) => ({ name, valueFrom: { secretKeyRef: { name: input.licenseSecret as string, key: name, optional: true } } }))
      : [];

  const podSettings = {
    ...(spec.service_account_name ? { serviceAccountName: spec.service_account_name } : {}),
    ...(spec.image_pull_secrets?.length ? { imagePullSecrets: spec.image_pull_secrets.map((s) => ({ name: s.name })) } : {}),
    enableServiceLinks: false,
    securityContext: podSecurity(APP_UID),
  };
  const fromEnvSecret = [{ secretRef: { name: envSecret } }];
  const restricted = (container: Record<string, unknown>) => withSecurity(container, input.allowPrivileged === true);

  // Both wait for their data stores: the image exits when it cannot reach them.
  const waitForDataStores = [
    {
      name: 'wait-for-postgres',
      image: postgresImage,
      command: ['sh', '-c', `until pg_isready -h ${postgresHost} -p 5432 -U ${postgresUser}; do sleep 2; done`],
      securityContext: CONTAINER_SECURITY,
    },
    {
      name: 'wait-for-redis',
      image: redisImage,
      command: ['sh', '-c', `until redis-cli -h ${redisHost} -p 6379 ping | grep -q PONG; do sleep 2; done`],
      env: [{ name: 'REDISCLI_AUTH', valueFrom: { secretKeyRef: { name: names.postgresSecret, key: 'REDIS_PASSWORD' } } }],
      securityContext: CONTAINER_SECURITY,
    },
  ];

  // A sidecar with `restartPolicy: Always` is a native sidecar (an init container that keeps
  // running); any other sidecar is one more container of the pod.
  const nativeSidecars = (spec.sidecars ?? []).filter((c) => c.restartPolicy === 'Always');
  const plainSidecars = (spec.sidecars ?? []).filter((c) => c.restartPolicy !== 'Always');
  const initContainers = [
    ...waitForDataStores,
    ...(spec.init_containers ?? []).map((c) => restricted(containerOf(c, false))),
    ...nativeSidecars.map((c) => restricted(containerOf(c, true))),
  ];

  const apiContainer = {
    name: 'api-server',
    image: input.revision.image,
    ports: [{ name: 'http', containerPort: API_PORT, protocol: 'TCP' }],
    envFrom: fromEnvSecret,
    // The queue Deployment runs the background jobs: the API server runs none.
    env: [{ name: 'PORT', value: String(API_PORT) }, { name: 'N_JOBS_PER_WORKER', value: '0' }, ...licenseEnv],
    ...resourcesOf(spec.cpu, spec.cpu_limit, spec.memory_mb, spec.memory_limit_mb),
    ...(spec.volume_mounts?.length ? { volumeMounts: spec.volume_mounts.map(mountOf) } : {}),
    ...probes(),
    securityContext: CONTAINER_SECURITY,
  };
  const queueContainer = {
    name: 'queue',
    image: input.revision.image,
    command: QUEUE_COMMAND,
    envFrom: fromEnvSecret,
    env: [{ name: 'PORT', value: String(API_PORT) }, { name: 'N_JOBS_PER_WORKER', value: String(JOBS_PER_WORKER) }, ...licenseEnv],
    ...resourcesOf(spec.queue_cpu, spec.queue_cpu_limit, spec.queue_memory_mb, spec.queue_memory_limit_mb),
    ...probes(),
    securityContext: CONTAINER_SECURITY,
  };

  const objects: K8sObject[] = [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: meta(envSecret, 'api-server'),
      type: 'Opaque',
      data: base64Values(env),
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta(names.apiServer, 'api-server'),
      spec: {
        replicas: replicasOf(minScale, apiAutoscaled ? maxScale : minScale, input.liveReplicas?.apiServer),
        selector: { matchLabels: selectorOf(input, 'api-server') },
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
        progressDeadlineSeconds: PROGRESS_DEADLINE_SECONDS,
        template: {
          metadata: { labels: labelsOf(input, spec, 'api-server'), ...annotationsOf(spec) },
          spec: {
            ...podSettings,
            ...(spec.volumes?.length ? { volumes: spec.volumes.map((v) => withoutNulls(v)) } : {}),
            initContainers,
            containers: [apiContainer, ...plainSidecars.map((c) => restricted(containerOf(c, false)))],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(names.apiServer, 'api-server'),
      spec: { type: 'ClusterIP', selector: selectorOf(input, 'api-server'), ports: [{ name: 'http', port: API_PORT, targetPort: 'http', protocol: 'TCP' }] },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta(names.queue, 'queue'),
      spec: {
        replicas: replicasOf(queueMin, queueAutoscaled ? queueMax : queueMin, input.liveReplicas?.queue),
        selector: { matchLabels: selectorOf(input, 'queue') },
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
        progressDeadlineSeconds: PROGRESS_DEADLINE_SECONDS,
        template: {
          metadata: { labels: labelsOf(input, spec, 'queue'), ...annotationsOf(spec) },
          spec: { ...podSettings, initContainers: waitForDataStores, containers: [queueContainer] },
        },
      },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: meta(names.redis, 'redis'),
      spec: {
        replicas: 1,
        selector: { matchLabels: selectorOf(input, 'redis') },
        // One Redis of ephemeral run data: the old one goes before the new one starts.
        strategy: { type: 'Recreate' },
        template: {
          // No labels or annotations of the spec's here: a change of them would restart Redis and lose its data.
          metadata: { labels: stableLabelsOf(input, 'redis') },
          spec: {
            enableServiceLinks: false,
            automountServiceAccountToken: false,
            securityContext: podSecurity(REDIS_UID),
            containers: [
              {
                name: 'redis',
                image: redisImage,
                // $(REDIS_PASSWORD) is expanded by Kubernetes from the container's env, not by a shell.
                args: [
                  '--requirepass',
                  '$(REDIS_PASSWORD)',
                  '--save',
                  '',
                  '--appendonly',
                  'no',
                  ...(spec.redis_memory_mb ? ['--maxmemory', `${Math.floor(spec.redis_memory_mb * 0.8)}mb`] : []),
                ],
                env: [{ name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: names.postgresSecret, key: 'REDIS_PASSWORD' } } }],
                ports: [{ name: 'redis', containerPort: 6379, protocol: 'TCP' }],
                // Redis's memory is its size: the limit is the request unless one is given.
                ...resourcesOf(spec.redis_cpu, spec.redis_cpu_limit, spec.redis_memory_mb, spec.redis_memory_limit_mb ?? spec.redis_memory_mb),
                readinessProbe: { tcpSocket: { port: 'redis' }, periodSeconds: 5 },
                securityContext: CONTAINER_SECURITY,
              },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(names.redis, 'redis'),
      spec: { type: 'ClusterIP', selector: selectorOf(input, 'redis'), ports: [{ name: 'redis', port: 6379, targetPort: 'redis', protocol: 'TCP' }] },
    },
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: meta(names.postgresSecret, 'postgres'),
      type: 'Opaque',
      data: base64Values({ POSTGRES_PASSWORD: input.postgresPassword, REDIS_PASSWORD: input.redisPassword }),
    },
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: meta(names.postgres, 'postgres'),
      spec: {
        replicas: 1,
        serviceName: names.postgres,
        selector: { matchLabels: selectorOf(input, 'postgres') },
        template: {
          // As Redis: nothing of the spec's, so a change of labels does not restart PostgreSQL.
          metadata: { labels: stableLabelsOf(input, 'postgres') },
          spec: {
            enableServiceLinks: false,
            automountServiceAccountToken: false,
            securityContext: podSecurity(POSTGRES_UID),
            containers: [
              {
                name: 'postgres',
                image: postgresImage,
                args: spec.db_max_connections ? ['-c', `max_connections=${spec.db_max_connections}`] : [],
                ports: [{ name: 'postgres', containerPort: 5432, protocol: 'TCP' }],
                env: [
                  { name: 'POSTGRES_USER', value: postgresUser },
                  { name: 'POSTGRES_DB', value: 'postgres' },
                  { name: 'POSTGRES_PASSWORD', valueFrom: { secretKeyRef: { name: names.postgresSecret, key: 'POSTGRES_PASSWORD' } } },
                  // A subdirectory: the volume's root may hold lost+found, which initdb refuses.
                  { name: 'PGDATA', value: '/var/lib/postgresql/data/pgdata' },
                ],
                ...resourcesOf(spec.db_cpu, spec.db_cpu_limit, spec.db_memory_mb, spec.db_memory_limit_mb),
                volumeMounts: [{ name: 'data', mountPath: '/var/lib/postgresql/data' }],
                readinessProbe: { exec: { command: ['pg_isready', '-U', postgresUser] }, periodSeconds: 5 },
                securityContext: CONTAINER_SECURITY,
              },
            ],
          },
        },
        // Kubernetes refuses changes to claim templates, so they carry only labels that never change
        // (not the revision's): the claims they make are found by the deployment's id at teardown.
        volumeClaimTemplates: [
          {
            metadata: { name: 'data', labels: stableLabelsOf(input, 'postgres') },
            spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: `${spec.db_storage_gi ?? DEFAULT_DB_STORAGE_GI}Gi` } } },
          },
        ],
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: meta(names.postgres, 'postgres'),
      // Headless: the StatefulSet's governing Service, its DNS name reaching the one pod.
      spec: { clusterIP: 'None', selector: selectorOf(input, 'postgres'), ports: [{ name: 'postgres', port: 5432, targetPort: 'postgres', protocol: 'TCP' }] },
    },
    dataStorePolicy(meta(names.redis, 'redis'), input, 'redis', 6379),
    dataStorePolicy(meta(names.postgres, 'postgres'), input, 'postgres', 5432),
  ];
  if (apiAutoscaled) objects.push(autoscaler(meta(names.apiServer, 'api-server'), names.apiServer, 'api-server', minScale, maxScale));
  if (queueAutoscaled) objects.push(autoscaler(meta(names.queue, 'queue'), names.queue, 'queue', queueMin, queueMax));
  return objects;
}

/** Only the deployment's own pods may reach its Redis or PostgreSQL, on its port. */
function dataStorePolicy(metadata: K8sObject['metadata'], input: RenderInput, component: Component, port: number): K8sObject {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata,
    spec: {
      podSelector: { matchLabels: selectorOf(input, component) },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ podSelector: { matchLabels: { [LABELS.deploymentId]: input.deployment.id } } }], ports: [{ protocol: 'TCP', port }] }],
    },
  };
}

/**
 * The restricted container settings under a user's container. Its own `securityContext` is kept
 * only where the listener allows it (`k8s_allow_privileged`; the API refuses it otherwise).
 */
function withSecurity(container: Record<string, unknown>, allowOwn: boolean): Record<string, unknown> {
  const own = allowOwn ? (container.securityContext as Record<string, unknown> | undefined) : undefined;
  return { ...container, securityContext: { ...CONTAINER_SECURITY, ...(own ?? {}) } };
}

/**
 * `min` without an autoscaler. With one, the count it chose (clamped to its range; its minimum is
 * at least 1) so that an apply does not undo its scaling; `min` for a new deployment. Always set:
 * the rollout is judged against it.
 */
function replicasOf(min: number, max: number, live: number | undefined): number {
  if (max <= min) return min;
  return Math.min(max, Math.max(min, live ?? min));
}

function autoscaler(metadata: K8sObject['metadata'], target: string, container: string, min: number, max: number): K8sObject {
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata,
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: target },
      minReplicas: min,
      maxReplicas: max,
      // The container's own CPU, not the pod's: a sidecar without a request does not break it.
      metrics: [
        { type: 'ContainerResource', containerResource: { name: 'cpu', container, target: { type: 'Utilization', averageUtilization: HPA_CPU_UTILIZATION } } },
      ],
    },
  };
}

/** The spec's labels, then ours (which win: teardown and pruning depend on them). */
function labelsOf(input: RenderInput, spec: ResourceSpec, component: Component): Record<string, string> {
  return { ...(spec.labels ?? {}), ...stableLabelsOf(input, component), [LABELS.revisionId]: input.revision.id };
}

function stableLabelsOf(input: RenderInput, component: Component): Record<string, string> {
  return { [LABELS.managedBy]: MANAGED_BY, [LABELS.component]: component, [LABELS.deploymentId]: input.deployment.id };
}

/** What a workload's pods are selected by: never the revision (a selector cannot change once made). */
function selectorOf(input: RenderInput, component: Component): Record<string, string> {
  return { [LABELS.deploymentId]: input.deployment.id, [LABELS.component]: component };
}

function annotationsOf(spec: ResourceSpec): { annotations?: Record<string, string> } {
  return spec.annotations && Object.keys(spec.annotations).length > 0 ? { annotations: { ...spec.annotations } } : {};
}

/**
 * CPU in cores as a Kubernetes quantity: whole cores as they are (`2`), fractions in millicores
 * (`0.5` → `500m`). Memory in MB as mebibytes (`512` → `512Mi`), as the hosted product sizes it.
 */
export function cpuQuantity(cores: number): string {
  return Number.isInteger(cores) ? String(cores) : `${Math.round(cores * 1000)}m`;
}

export function memoryQuantity(mb: number): string {
  return `${mb}Mi`;
}

function resourcesOf(
  cpu: number | null | undefined,
  cpuLimit: number | null | undefined,
  memoryMb: number | null | undefined,
  memoryLimitMb: number | null | undefined,
) {
  const requests: Record<string, string> = {};
  const limits: Record<string, string> = {};
  if (cpu != null) requests.cpu = cpuQuantity(cpu);
  if (memoryMb != null) requests.memory = memoryQuantity(memoryMb);
  if (cpuLimit != null) limits.cpu = cpuQuantity(cpuLimit);
  if (memoryLimitMb != null) limits.memory = memoryQuantity(memoryLimitMb);
  const resources = { ...(Object.keys(requests).length ? { requests } : {}), ...(Object.keys(limits).length ? { limits } : {}) };
  return Object.keys(resources).length ? { resources } : {};
}

/**
 * A user's container as Kubernetes takes it: nulls dropped, and `restartPolicy` kept only where
 * Kubernetes allows it (`Always`, on an init container: a native sidecar).
 */
function containerOf(container: Container, nativeSidecar: boolean): Record<string, unknown> {
  const { restartPolicy: _restartPolicy, env, volumeMounts, ...rest } = container;
  return {
    ...withoutNulls(rest),
    ...(env?.length ? { env: env.map(envVarOf) } : {}),
    ...(volumeMounts?.length ? { volumeMounts: volumeMounts.map(mountOf) } : {}),
    ...(nativeSidecar ? { restartPolicy: 'Always' } : {}),
  };
}

/** An empty `value` beside `valueFrom` means "not given" (the seed's default); Kubernetes wants it absent. */
function envVarOf(env: NonNullable<Container['env']>[number]): Record<string, unknown> {
  const out = withoutNulls(env);
  if (env.valueFrom != null && env.value === '') delete out.value;
  return out;
}

function mountOf(mount: NonNullable<ResourceSpec['volume_mounts']>[number]): Record<string, unknown> {
  return withoutNulls(mount);
}

/** The object without its null and undefined fields (the API's "not given"; Kubernetes wants them absent). */
function withoutNulls<T extends object>(value: T): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null && v !== undefined));
}

function base64Values(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]));
}
