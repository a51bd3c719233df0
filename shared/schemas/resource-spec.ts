import { z } from 'zod';
import { lazySchema } from './lazy.ts';

/**
 * A Kubernetes DNS label (RFC 1123): what the API server accepts for volume and container names.
 * The 63-character bound is checked separately so the message can say which rule was broken.
 */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** A C identifier: the names a process can read back as environment variables. */
export const C_IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

const DnsLabel = lazySchema(() =>
  z.string({ error: 'name must be a string' }).max(63, { error: 'name must be at most 63 characters (a DNS label)' }).regex(DNS_LABEL, {
    error: 'name must be a DNS label: a-z, 0-9 and -, starting and ending with a letter or digit',
  }),
);

/**
 * The seed leaves these Kubernetes objects open ("free-form object"); the data plane hands them to
 * Kubernetes as they are, and Kubernetes is the one that knows their full shape.
 */
const FreeForm = lazySchema(() => z.record(z.string(), z.unknown()));

const StringMap = lazySchema(() => z.record(z.string(), z.string()));

/** A non-negative whole number (replicas, CPU, MB, GiB), with a message that names the field. */
function count(field: string) {
  return z
    .int({ error: `${field} must be a whole number` })
    .min(0, { error: `${field} must be 0 or more` })
    .nullish();
}

/** Fields the seed lists but marks "not to be used": accepted so clients that send them still work. */
/** CPU in cores: a number ≥ 0 (`0.5` is half a core), as the hosted API has it (the seed's table says integer). */
function cores(field: string) {
  return z
    .number({ error: `${field} must be a number` })
    .min(0, { error: `${field} must be 0 or more` })
    .nullish();
}

function unused(field: string) {
  return count(field).describe(`${field} is present in the interface but not to be used; it is stored and ignored.`);
}

/** `sidecars[0].volumeMounts[1].name`: how a path reads in a sentence. */
function formatPath(path: ReadonlyArray<string | number>): string {
  return path.map((part, i) => (typeof part === 'number' ? `[${part}]` : i === 0 ? part : `.${part}`)).join('');
}

/** A reference to an object in the same namespace, by name (used for image pull secrets). */
export const LocalObjectReference = lazySchema(() =>
  z.strictObject({
    name: z.string({ error: 'name must be a string' }).min(1, { error: 'name must not be empty' }),
  }),
);
export type LocalObjectReference = z.infer<typeof LocalObjectReference>;

/**
 * A pod volume. The seed gives Volume no required fields, so `name` may be absent; when present it is
 * a DNS label, and the spec-level check makes it unique.
 */
export const Volume = lazySchema(() =>
  z.strictObject({
    name: DnsLabel.optional(),
    configMap: FreeForm.nullish(),
    secret: FreeForm.nullish(),
    emptyDir: FreeForm.nullish(),
    persistentVolumeClaim: FreeForm.nullish(),
    nfs: FreeForm.nullish(),
    projected: FreeForm.nullish(),
    downwardAPI: FreeForm.nullish(),
    csi: FreeForm.nullish(),
  }),
);
export type Volume = z.infer<typeof Volume>;

/** A mount of a named volume; that the name exists in `volumes` is checked on the whole spec. */
export const VolumeMount = lazySchema(() =>
  z.strictObject({
    name: z.string({ error: 'name must be a string' }).min(1, { error: 'name must not be empty' }),
    mountPath: z.string({ error: 'mountPath must be a string' }).min(1, { error: 'mountPath must not be empty' }),
    subPath: z.string({ error: 'subPath must be a string' }).nullish(),
    mountPropagation: z.string({ error: 'mountPropagation must be a string' }).nullish(),
    subPathExpr: z.string({ error: 'subPathExpr must be a string' }).nullish(),
    readOnly: z.boolean({ error: 'readOnly must be true or false' }).nullish(),
  }),
);
export type VolumeMount = z.infer<typeof VolumeMount>;

/**
 * An environment variable. `value` defaults to the empty string, so an absent, null or empty value all
 * mean "not given"; only then may `valueFrom` supply it, since Kubernetes refuses both at once.
 */
export const EnvVar = lazySchema(() =>
  z
    .strictObject({
      name: z.string({ error: 'name must be a string' }).regex(C_IDENTIFIER, { error: 'name must be a C identifier ([A-Za-z_][A-Za-z0-9_]*)' }),
      value: z.string({ error: 'value must be a string' }).nullish(),
      valueFrom: FreeForm.nullish(),
    })
    .superRefine((env, ctx) => {
      if (env.valueFrom != null && env.value != null && env.value !== '') {
        ctx.addIssue({
          code: 'custom',
          message: `valueFrom cannot be used for env var '${env.name}' because its value is not empty; set one or the other`,
          path: ['valueFrom'],
        });
      }
    }),
);
export type EnvVar = z.infer<typeof EnvVar>;

/** Kubernetes quantities (`"500m"`, `"1Gi"`) by resource name; kept as strings, as Kubernetes takes them. */
export const ResourceRequirements = lazySchema(() =>
  z.strictObject({
    limits: StringMap.nullish(),
    requests: StringMap.nullish(),
  }),
);
export type ResourceRequirements = z.infer<typeof ResourceRequirements>;

/** An init container or a sidecar. Name uniqueness and mount targets are checked on the whole spec. */
export const Container = lazySchema(() =>
  z.strictObject({
    name: DnsLabel,
    image: z.string({ error: 'image must be a string' }).min(1, { error: 'image must not be empty' }),
    imagePullPolicy: z.enum(['Always', 'Never', 'IfNotPresent'], { error: 'imagePullPolicy must be one of Always, Never, IfNotPresent' }).nullish(),
    command: z.array(z.string({ error: 'command items must be strings' })).nullish(),
    args: z.array(z.string({ error: 'args items must be strings' })).nullish(),
    workingDir: z.string({ error: 'workingDir must be a string' }).nullish(),
    env: z.array(EnvVar).nullish(),
    envFrom: z.array(FreeForm).nullish(),
    resources: ResourceRequirements.nullish(),
    volumeMounts: z.array(VolumeMount).nullish(),
    securityContext: FreeForm.nullish(),
    // Always on an init container is what makes it a native sidecar in Kubernetes.
    restartPolicy: z.enum(['Always', 'OnFailure'], { error: 'restartPolicy must be one of Always, OnFailure' }).nullish(),
  }),
);
export type Container = z.infer<typeof Container>;

/** Pairs (low, high) where high, when both are set, must not be below low. Issues go on high. */
const ORDERED_PAIRS = [
  ['min_scale', 'max_scale'],
  ['queue_min_scale', 'queue_max_scale'],
  ['cpu', 'cpu_limit'],
  ['memory_mb', 'memory_limit_mb'],
  ['queue_cpu', 'queue_cpu_limit'],
  ['queue_memory_mb', 'queue_memory_limit_mb'],
  ['db_cpu', 'db_cpu_limit'],
  ['db_memory_mb', 'db_memory_limit_mb'],
  ['redis_cpu', 'redis_cpu_limit'],
  ['redis_memory_mb', 'redis_memory_limit_mb'],
] as const;

/**
 * Compute and Kubernetes settings of an `external_docker` deployment. Every field is optional and
 * nullable; defaults are not filled in here (the API stores what it was given), see
 * `withResourceSpecDefaults`.
 */
export const ResourceSpec = lazySchema(() =>
  z
    .strictObject({
      min_scale: count('min_scale'),
      max_scale: count('max_scale'),
      cpu: cores('cpu'),
      cpu_limit: cores('cpu_limit'),
      memory_mb: count('memory_mb'),
      memory_limit_mb: count('memory_limit_mb'),
      queue_min_scale: count('queue_min_scale'),
      queue_max_scale: count('queue_max_scale'),
      queue_cpu: cores('queue_cpu'),
      queue_cpu_limit: cores('queue_cpu_limit'),
      queue_memory_mb: count('queue_memory_mb'),
      queue_memory_limit_mb: count('queue_memory_limit_mb'),
      orchestrator_cpu: cores('orchestrator_cpu').describe('orchestrator_cpu is present in the interface but not to be used; it is stored and ignored.'),
      orchestrator_cpu_limit: cores('orchestrator_cpu_limit').describe(
        'orchestrator_cpu_limit is present in the interface but not to be used; it is stored and ignored.',
      ),
      orchestrator_memory_mb: unused('orchestrator_memory_mb'),
      orchestrator_memory_limit_mb: unused('orchestrator_memory_limit_mb'),
      orchestrator_min_scale: unused('orchestrator_min_scale'),
      orchestrator_max_scale: unused('orchestrator_max_scale'),
      executor_cpu: cores('executor_cpu').describe('executor_cpu is present in the interface but not to be used; it is stored and ignored.'),
      executor_cpu_limit: cores('executor_cpu_limit').describe('executor_cpu_limit is present in the interface but not to be used; it is stored and ignored.'),
      executor_memory_mb: unused('executor_memory_mb'),
      executor_memory_limit_mb: unused('executor_memory_limit_mb'),
      redis_memory_mb: count('redis_memory_mb'),
      redis_cpu: cores('redis_cpu'),
      redis_cpu_limit: cores('redis_cpu_limit'),
      redis_memory_limit_mb: count('redis_memory_limit_mb'),
      labels: StringMap.nullish(),
      annotations: StringMap.nullish(),
      service_account_name: z.string({ error: 'service_account_name must be a string' }).nullish(),
      image_pull_secrets: z.array(LocalObjectReference).nullish(),
      volumes: z.array(Volume).nullish(),
      volume_mounts: z.array(VolumeMount).nullish(),
      init_containers: z.array(Container).nullish(),
      sidecars: z.array(Container).nullish(),
      db_cpu: z.number({ error: 'db_cpu must be a number' }).min(0, { error: 'db_cpu must be 0 or more' }).nullish(),
      db_cpu_limit: z.number({ error: 'db_cpu_limit must be a number' }).min(0, { error: 'db_cpu_limit must be 0 or more' }).nullish(),
      db_memory_mb: count('db_memory_mb'),
      db_memory_limit_mb: count('db_memory_limit_mb'),
      db_storage_gi: count('db_storage_gi'),
      db_max_connections: count('db_max_connections'),
    })
    .superRefine((spec, ctx) => {
      for (const [low, high] of ORDERED_PAIRS) {
        const lowValue = spec[low];
        const highValue = spec[high];
        if (lowValue != null && highValue != null && highValue < lowValue) {
          ctx.addIssue({
            code: 'custom',
            message: `${high} (${highValue}) must not be below ${low} (${lowValue})`,
            path: [high],
          });
        }
      }

      // Kubernetes rejects a pod whose volumes share a name; say so before a revision is built.
      const volumeNames = new Set<string>();
      (spec.volumes ?? []).forEach((volume, index) => {
        if (volume.name === undefined) return;
        if (volumeNames.has(volume.name)) {
          ctx.addIssue({
            code: 'custom',
            message: `volumes[${index}].name '${volume.name}' is used by an earlier volume; volume names must be unique`,
            path: ['volumes', index, 'name'],
          });
        }
        volumeNames.add(volume.name);
      });

      const checkMounts = (mounts: readonly VolumeMount[] | null | undefined, base: ReadonlyArray<string | number>) => {
        (mounts ?? []).forEach((mount, index) => {
          if (!volumeNames.has(mount.name)) {
            const path = [...base, index, 'name'];
            ctx.addIssue({
              code: 'custom',
              message: `${formatPath(path)} '${mount.name}' does not name a volume in volumes`,
              path,
            });
          }
        });
      };
      checkMounts(spec.volume_mounts, ['volume_mounts']);

      // Init containers and sidecars end up in one pod, where container names must be unique.
      const containerNames = new Map<string, string>();
      for (const list of ['init_containers', 'sidecars'] as const) {
        (spec[list] ?? []).forEach((container, index) => {
          const where = `${list}[${index}]`;
          const earlier = containerNames.get(container.name);
          if (earlier !== undefined) {
            ctx.addIssue({
              code: 'custom',
              message: `${where}.name '${container.name}' is already used by ${earlier}; container names must be unique across init_containers and sidecars`,
              path: [list, index, 'name'],
            });
          } else {
            containerNames.set(container.name, where);
          }
          checkMounts(container.volumeMounts, [list, index, 'volumeMounts']);
        });
      }
    }),
);
export type ResourceSpec = z.infer<typeof ResourceSpec>;

type NumericField = {
  [K in keyof ResourceSpec]-?: NonNullable<ResourceSpec[K]> extends number ? K : never;
}[keyof ResourceSpec];

function twice(value: number | null | undefined): number | null | undefined {
  return value == null ? value : 2 * value;
}

/**
 * The spec with the seed's stated defaults filled in (`cpu_limit` = 2 × `cpu`, `queue_cpu` = `cpu`,
 * …), for the data plane to render. A field is filled only when it is null or absent and its source
 * is set; the input is not changed. The API stores and returns specs without these defaults.
 */
export function withResourceSpecDefaults(spec: ResourceSpec): ResourceSpec {
  const out: ResourceSpec = { ...spec };
  const fill = (field: NumericField, value: number | null | undefined): void => {
    if (out[field] == null && value != null) out[field] = value;
  };
  fill('cpu_limit', twice(out.cpu));
  fill('memory_limit_mb', twice(out.memory_mb));
  fill('queue_min_scale', out.min_scale);
  fill('queue_max_scale', out.max_scale);
  // Order matters: the queue limits default from the queue requests, which may themselves be defaults.
  fill('queue_cpu', out.cpu);
  fill('queue_cpu_limit', twice(out.queue_cpu));
  fill('queue_memory_mb', out.memory_mb);
  fill('queue_memory_limit_mb', twice(out.queue_memory_mb));
  fill('db_cpu_limit', twice(out.db_cpu));
  fill('db_memory_limit_mb', twice(out.db_memory_mb));
  return out;
}
