import { describe, expect, it } from 'vitest';
import {
  C_IDENTIFIER,
  Container,
  DNS_LABEL,
  EnvVar,
  LocalObjectReference,
  ResourceRequirements,
  ResourceSpec,
  Volume,
  VolumeMount,
  withResourceSpecDefaults,
} from '../../shared/schemas/resource-spec.ts';

type Path = Array<string | number>;

function expectValid(input: unknown): ResourceSpec {
  const result = ResourceSpec.safeParse(input);
  expect(result.success, JSON.stringify(result.error?.issues)).toBe(true);
  return result.data as ResourceSpec;
}

/**
 * Parses `input`, expects it to fail with an issue at exactly `path` of `code`, and returns that issue.
 * `mention` is what the message must name; by default the last key of the path.
 */
function expectIssue(input: unknown, path: Path, code: string, mention?: string) {
  const result = ResourceSpec.safeParse(input);
  expect(result.success).toBe(false);
  const issues = result.error?.issues ?? [];
  const issue = issues.find((candidate) => JSON.stringify(candidate.path) === JSON.stringify(path));
  expect(issue, `no issue at ${JSON.stringify(path)} in ${JSON.stringify(issues)}`).toBeDefined();
  expect(issue?.code).toBe(code);
  const named = mention ?? [...path].reverse().find((part): part is string => typeof part === 'string');
  if (named !== undefined) expect(issue?.message).toContain(named);
  return issue;
}

const sidecar = (extra: Record<string, unknown> = {}) => ({ name: 'proxy', image: 'envoyproxy/envoy:v1.31', ...extra });

describe('ResourceSpec: shape', () => {
  it('accepts an empty spec and a spec of nulls', () => {
    expectValid({});
    expectValid({
      min_scale: null,
      cpu: null,
      labels: null,
      volumes: null,
      volume_mounts: null,
      init_containers: null,
      sidecars: null,
      db_cpu: null,
      orchestrator_cpu: null,
      executor_memory_mb: null,
    });
  });

  it('rejects unknown keys at the top level and in nested shapes', () => {
    const top = expectIssue({ cpu: 1, replicas: 3 }, [], 'unrecognized_keys', 'replicas');
    expect(top && 'keys' in top ? top.keys : undefined).toEqual(['replicas']);
    expectIssue({ volumes: [{ name: 'data', hostPath: {} }] }, ['volumes', 0], 'unrecognized_keys', 'hostPath');
    expectIssue({ sidecars: [sidecar({ ports: [] })] }, ['sidecars', 0], 'unrecognized_keys', 'ports');
    expectIssue({ sidecars: [sidecar({ env: [{ name: 'A', secret: 'x' }] })] }, ['sidecars', 0, 'env', 0], 'unrecognized_keys', 'secret');
    expectIssue({ image_pull_secrets: [{ name: 'regcred', namespace: 'x' }] }, ['image_pull_secrets', 0], 'unrecognized_keys', 'namespace');
  });

  it('rejects wrong types', () => {
    expectIssue({ min_scale: '1' }, ['min_scale'], 'invalid_type');
    expectIssue({ db_cpu: '0.5' }, ['db_cpu'], 'invalid_type');
    expectIssue({ labels: { team: 1 } }, ['labels', 'team'], 'invalid_type', 'string');
    expectIssue({ service_account_name: 7 }, ['service_account_name'], 'invalid_type');
    expectIssue({ volumes: { name: 'data' } }, ['volumes'], 'invalid_type', 'array');
    expectIssue({ sidecars: [sidecar({ command: 'run' })] }, ['sidecars', 0, 'command'], 'invalid_type', 'array');
    expectIssue({ volume_mounts: [{ name: 'data', mountPath: '/d', readOnly: 'yes' }] }, ['volume_mounts', 0, 'readOnly'], 'invalid_type');
  });

  it('integers counting replicas, MB and GiB are whole numbers of 0 or more; CPU is a number (0.5 = half a core)', () => {
    expectValid({ min_scale: 0, max_scale: 10, cpu: 1, memory_mb: 512, redis_memory_mb: 256, db_storage_gi: 10, db_max_connections: 100 });
    expectIssue({ min_scale: -1 }, ['min_scale'], 'too_small');
    expectIssue({ memory_mb: -512 }, ['memory_mb'], 'too_small');
    expectIssue({ db_storage_gi: -1 }, ['db_storage_gi'], 'too_small');
    expectIssue({ max_scale: 1.5 }, ['max_scale'], 'invalid_type');
    expectIssue({ queue_min_scale: 0.5 }, ['queue_min_scale'], 'invalid_type');
    expectValid({ cpu: 0.5, cpu_limit: 1.5, queue_cpu: 0.25, redis_cpu: 0.1, redis_cpu_limit: 0.2, redis_memory_limit_mb: 512 });
    expectIssue({ cpu: -0.5 }, ['cpu'], 'too_small');
    expectIssue({ cpu: '1' }, ['cpu'], 'invalid_type');
    expectIssue({ redis_cpu: 1, redis_cpu_limit: 0.5 }, ['redis_cpu_limit'], 'custom');
    expectIssue({ redis_memory_limit_mb: 1.5 }, ['redis_memory_limit_mb'], 'invalid_type');
  });

  it('db_cpu and db_cpu_limit are numbers of 0 or more, fractions allowed', () => {
    expectValid({ db_cpu: 0.5, db_cpu_limit: 1.5 });
    expectIssue({ db_cpu: -0.5 }, ['db_cpu'], 'too_small');
    expectIssue({ db_cpu_limit: -1 }, ['db_cpu_limit'], 'too_small');
  });

  it('accepts the orchestrator_* and executor_* fields, which are documented as not to be used', () => {
    expectValid({ orchestrator_cpu: 1, orchestrator_max_scale: 2, executor_memory_mb: 256, executor_cpu_limit: 2 });
    expectIssue({ orchestrator_min_scale: -1 }, ['orchestrator_min_scale'], 'too_small');
    expect(ResourceSpec.shape.orchestrator_cpu.description).toMatch(/not to be used/);
    expect(ResourceSpec.shape.executor_memory_limit_mb.description).toMatch(/not to be used/);
  });

  it('free-form objects accept any keys and null', () => {
    expectValid({
      volumes: [
        { name: 'cfg', configMap: { name: 'app-config', items: [{ key: 'a', path: 'a' }] } },
        { name: 'tmp', emptyDir: {} },
        { name: 'pvc', persistentVolumeClaim: { claimName: 'data' }, secret: null },
      ],
      sidecars: [sidecar({ envFrom: [{ configMapRef: { name: 'x' } }], securityContext: { runAsUser: 1000 } })],
    });
    expectIssue({ volumes: [{ name: 'tmp', emptyDir: 'yes' }] }, ['volumes', 0, 'emptyDir'], 'invalid_type', 'record');
  });
});

describe('ResourceSpec: DNS-label names', () => {
  it('accepts DNS labels up to 63 characters for volumes and containers', () => {
    expectValid({
      volumes: [{ name: 'a' }, { name: '0data-1' }, { name: 'a'.repeat(63) }],
      init_containers: [{ name: 'migrate', image: 'app:1' }],
      sidecars: [sidecar({ name: 'b'.repeat(63) })],
    });
  });

  it('rejects uppercase, 64 characters and a leading or trailing -', () => {
    expectIssue({ volumes: [{ name: 'Data' }] }, ['volumes', 0, 'name'], 'invalid_format');
    expectIssue({ volumes: [{ name: 'ok' }, { name: 'a'.repeat(64) }] }, ['volumes', 1, 'name'], 'too_big');
    expectIssue({ volumes: [{ name: '-data' }] }, ['volumes', 0, 'name'], 'invalid_format');
    expectIssue({ sidecars: [sidecar({ name: 'Proxy' })] }, ['sidecars', 0, 'name'], 'invalid_format');
    expectIssue({ init_containers: [{ name: 'c'.repeat(64), image: 'app:1' }] }, ['init_containers', 0, 'name'], 'too_big');
    expectIssue({ init_containers: [{ name: 'migrate-', image: 'app:1' }] }, ['init_containers', 0, 'name'], 'invalid_format');
    expectIssue({ sidecars: [sidecar({ name: 'a_b' })] }, ['sidecars', 0, 'name'], 'invalid_format');
  });

  it('exports the DNS label pattern', () => {
    expect(DNS_LABEL.test('a-1')).toBe(true);
    expect(DNS_LABEL.test('A')).toBe(false);
    expect(DNS_LABEL.test('a-')).toBe(false);
  });

  it('volume names are unique within the spec', () => {
    expectValid({ volumes: [{ name: 'data' }, { name: 'cache' }] });
    expectIssue({ volumes: [{ name: 'data' }, { name: 'cache' }, { name: 'data' }] }, ['volumes', 2, 'name'], 'custom', 'data');
  });

  it('container names are unique across init_containers and sidecars', () => {
    expectValid({ init_containers: [{ name: 'migrate', image: 'app:1' }], sidecars: [sidecar()] });
    expectIssue({ init_containers: [{ name: 'proxy', image: 'app:1' }], sidecars: [sidecar()] }, ['sidecars', 0, 'name'], 'custom', 'proxy');
    expectIssue({ sidecars: [sidecar(), sidecar({ image: 'other:1' })] }, ['sidecars', 1, 'name'], 'custom', 'proxy');
  });
});

describe('ResourceSpec: volume mounts', () => {
  const volumes = [{ name: 'data', emptyDir: {} }];

  it('a top-level mount names a volume', () => {
    expectValid({ volumes, volume_mounts: [{ name: 'data', mountPath: '/data', readOnly: true }] });
    const issue = expectIssue(
      {
        volumes,
        volume_mounts: [
          { name: 'data', mountPath: '/data' },
          { name: 'cache', mountPath: '/cache' },
        ],
      },
      ['volume_mounts', 1, 'name'],
      'custom',
      'volume_mounts[1].name',
    );
    expect(issue?.message).toBe("volume_mounts[1].name 'cache' does not name a volume in volumes");
  });

  it('a mount without any volumes fails', () => {
    expectIssue({ volume_mounts: [{ name: 'data', mountPath: '/data' }] }, ['volume_mounts', 0, 'name'], 'custom', 'data');
  });

  it("a container's mount names a volume, in init containers and sidecars", () => {
    expectValid({
      volumes,
      init_containers: [{ name: 'seed', image: 'app:1', volumeMounts: [{ name: 'data', mountPath: '/seed' }] }],
      sidecars: [sidecar({ volumeMounts: [{ name: 'data', mountPath: '/d', subPath: 'proxy' }] })],
    });
    expectIssue(
      {
        volumes,
        sidecars: [
          sidecar({
            volumeMounts: [
              { name: 'data', mountPath: '/d' },
              { name: 'logs', mountPath: '/l' },
            ],
          }),
        ],
      },
      ['sidecars', 0, 'volumeMounts', 1, 'name'],
      'custom',
      'sidecars[0].volumeMounts[1].name',
    );
    expectIssue(
      { volumes, init_containers: [{ name: 'seed', image: 'app:1', volumeMounts: [{ name: 'nope', mountPath: '/x' }] }] },
      ['init_containers', 0, 'volumeMounts', 0, 'name'],
      'custom',
      'nope',
    );
  });

  it('mountPath is required', () => {
    expectIssue({ volumes, volume_mounts: [{ name: 'data' }] }, ['volume_mounts', 0, 'mountPath'], 'invalid_type');
  });
});

describe('ResourceSpec: containers and env', () => {
  it('image is required and name is required', () => {
    expectIssue({ sidecars: [{ name: 'proxy' }] }, ['sidecars', 0, 'image'], 'invalid_type');
    expectIssue({ sidecars: [{ image: 'app:1' }] }, ['sidecars', 0, 'name'], 'invalid_type');
  });

  it('imagePullPolicy is Always, Never or IfNotPresent', () => {
    for (const policy of ['Always', 'Never', 'IfNotPresent', null]) {
      expectValid({ sidecars: [sidecar({ imagePullPolicy: policy })] });
    }
    expectIssue({ sidecars: [sidecar({ imagePullPolicy: 'Sometimes' })] }, ['sidecars', 0, 'imagePullPolicy'], 'invalid_value');
    expectIssue({ init_containers: [{ name: 'a', image: 'b', imagePullPolicy: 'always' }] }, ['init_containers', 0, 'imagePullPolicy'], 'invalid_value');
  });

  it('restartPolicy is Always or OnFailure', () => {
    expectValid({ init_containers: [{ name: 'a', image: 'b', restartPolicy: 'Always' }], sidecars: [sidecar({ restartPolicy: 'OnFailure' })] });
    expectIssue({ sidecars: [sidecar({ restartPolicy: 'Never' })] }, ['sidecars', 0, 'restartPolicy'], 'invalid_value');
  });

  it('EnvVar names are C identifiers', () => {
    expectValid({ sidecars: [sidecar({ env: [{ name: 'LOG_LEVEL', value: 'debug' }, { name: '_x9' }, { name: 'a', value: null }] })] });
    expectIssue({ sidecars: [sidecar({ env: [{ name: 'OK' }, { name: '1BAD' }] })] }, ['sidecars', 0, 'env', 1, 'name'], 'invalid_format');
    expectIssue({ sidecars: [sidecar({ env: [{ name: 'LOG-LEVEL' }] })] }, ['sidecars', 0, 'env', 0, 'name'], 'invalid_format');
    expectIssue({ init_containers: [{ name: 'a', image: 'b', env: [{ name: '' }] }] }, ['init_containers', 0, 'env', 0, 'name'], 'invalid_format');
    expect(C_IDENTIFIER.test('A_1')).toBe(true);
    expect(C_IDENTIFIER.test('1A')).toBe(false);
  });

  it('valueFrom only when value is empty, null or absent', () => {
    const valueFrom = { secretKeyRef: { name: 'db', key: 'password' } };
    expectValid({
      sidecars: [
        sidecar({
          env: [
            { name: 'A', value: '', valueFrom },
            { name: 'B', value: null, valueFrom },
            { name: 'C', valueFrom },
          ],
        }),
      ],
    });
    expectIssue(
      { init_containers: [{ name: 'a', image: 'b', env: [{ name: 'X' }, { name: 'Y', value: '' }, { name: 'PASSWORD', value: 'hunter2', valueFrom }] }] },
      ['init_containers', 0, 'env', 2, 'valueFrom'],
      'custom',
      'valueFrom',
    );
  });

  it('resources holds string quantities', () => {
    expectValid({ sidecars: [sidecar({ resources: { limits: { cpu: '500m', memory: '128Mi' }, requests: null } })] });
    expectIssue({ sidecars: [sidecar({ resources: { limits: { cpu: 1 } } })] }, ['sidecars', 0, 'resources', 'limits', 'cpu'], 'invalid_type', 'string');
  });
});

describe('ResourceSpec: ordering of scales and limits', () => {
  it('min_scale ≤ max_scale and queue_min_scale ≤ queue_max_scale', () => {
    expectValid({ min_scale: 2, max_scale: 2, queue_min_scale: 0, queue_max_scale: 5 });
    expectValid({ min_scale: 5 });
    expectIssue({ min_scale: 3, max_scale: 2 }, ['max_scale'], 'custom', 'min_scale');
    expectIssue({ queue_min_scale: 4, queue_max_scale: 1 }, ['queue_max_scale'], 'custom', 'queue_min_scale');
  });

  it('a limit is not below its request, reported on the limit', () => {
    expectValid({ cpu: 2, cpu_limit: 2, memory_mb: 512, memory_limit_mb: 1024, db_cpu: 0.5, db_cpu_limit: 0.5 });
    expectValid({ cpu_limit: 1, memory_limit_mb: 1 });
    const cases: Array<[Record<string, number>, string]> = [
      [{ cpu: 2, cpu_limit: 1 }, 'cpu_limit'],
      [{ memory_mb: 1024, memory_limit_mb: 512 }, 'memory_limit_mb'],
      [{ queue_cpu: 2, queue_cpu_limit: 1 }, 'queue_cpu_limit'],
      [{ queue_memory_mb: 256, queue_memory_limit_mb: 128 }, 'queue_memory_limit_mb'],
      [{ db_cpu: 1.5, db_cpu_limit: 1 }, 'db_cpu_limit'],
      [{ db_memory_mb: 2048, db_memory_limit_mb: 1024 }, 'db_memory_limit_mb'],
    ];
    for (const [input, limit] of cases) {
      const result = ResourceSpec.safeParse(input);
      expect(result.success).toBe(false);
      expect(result.error?.issues).toHaveLength(1);
      expectIssue(input, [limit], 'custom', limit);
    }
  });
});

describe('ResourceSpec: a realistic spec', () => {
  const full = {
    min_scale: 1,
    max_scale: 4,
    cpu: 1,
    cpu_limit: 2,
    memory_mb: 1024,
    memory_limit_mb: 2048,
    queue_min_scale: 1,
    queue_max_scale: 3,
    queue_cpu: 1,
    queue_cpu_limit: 2,
    queue_memory_mb: 512,
    queue_memory_limit_mb: 1024,
    redis_memory_mb: 256,
    labels: { team: 'agents', 'app.kubernetes.io/part-of': 'support-bot' },
    annotations: { 'prometheus.io/scrape': 'true' },
    service_account_name: 'agent-runner',
    image_pull_secrets: [{ name: 'regcred' }],
    volumes: [
      { name: 'config', configMap: { name: 'agent-config' } },
      { name: 'scratch', emptyDir: { sizeLimit: '1Gi' } },
      { name: 'certs', secret: { secretName: 'tls' } },
    ],
    volume_mounts: [
      { name: 'config', mountPath: '/etc/agent', readOnly: true },
      { name: 'scratch', mountPath: '/tmp/work' },
    ],
    init_containers: [
      {
        name: 'wait-for-db',
        image: 'busybox:1.36',
        imagePullPolicy: 'IfNotPresent',
        command: ['sh', '-c'],
        args: ['until nc -z db 5432; do sleep 1; done'],
      },
    ],
    sidecars: [
      {
        name: 'otel-collector',
        image: 'otel/opentelemetry-collector:0.110.0',
        imagePullPolicy: 'Always',
        workingDir: '/otel',
        env: [
          { name: 'OTEL_LOG_LEVEL', value: 'info' },
          { name: 'API_KEY', valueFrom: { secretKeyRef: { name: 'otel', key: 'api-key' } } },
        ],
        envFrom: [{ configMapRef: { name: 'otel-env' } }],
        resources: { limits: { cpu: '200m', memory: '256Mi' }, requests: { cpu: '100m', memory: '128Mi' } },
        volumeMounts: [
          { name: 'config', mountPath: '/otel/config', subPath: 'otel.yaml', readOnly: true },
          { name: 'certs', mountPath: '/otel/certs' },
        ],
        securityContext: { runAsNonRoot: true, readOnlyRootFilesystem: true },
        restartPolicy: 'Always',
      },
    ],
    db_cpu: 0.5,
    db_cpu_limit: 1,
    db_memory_mb: 1024,
    db_memory_limit_mb: 2048,
    db_storage_gi: 20,
    db_max_connections: 200,
  };

  it('passes and parses to the same value', () => {
    expect(expectValid(full)).toEqual(full);
  });

  it('the nested schemas parse on their own', () => {
    expect(LocalObjectReference.parse({ name: 'regcred' })).toEqual({ name: 'regcred' });
    expect(Volume.parse(full.volumes[0])).toEqual(full.volumes[0]);
    expect(VolumeMount.parse(full.volume_mounts[0])).toEqual(full.volume_mounts[0]);
    expect(Container.parse(full.sidecars[0])).toEqual(full.sidecars[0]);
    expect(ResourceRequirements.parse({ limits: null })).toEqual({ limits: null });
    expect(EnvVar.safeParse({ name: 'A', value: 'x', valueFrom: {} }).error?.issues[0]?.path).toEqual(['valueFrom']);
  });
});

describe('withResourceSpecDefaults', () => {
  it('fills every stated default from its source', () => {
    expect(withResourceSpecDefaults({ min_scale: 1, max_scale: 3, cpu: 2, memory_mb: 512, db_cpu: 0.5, db_memory_mb: 1024 })).toEqual({
      min_scale: 1,
      max_scale: 3,
      cpu: 2,
      cpu_limit: 4,
      memory_mb: 512,
      memory_limit_mb: 1024,
      queue_min_scale: 1,
      queue_max_scale: 3,
      queue_cpu: 2,
      queue_cpu_limit: 4,
      queue_memory_mb: 512,
      queue_memory_limit_mb: 1024,
      db_cpu: 0.5,
      db_cpu_limit: 1,
      db_memory_mb: 1024,
      db_memory_limit_mb: 2048,
    });
  });

  it('keeps values that were given, and derives queue limits from a given queue request', () => {
    const spec: ResourceSpec = { cpu: 1, cpu_limit: 1, queue_cpu: 3, memory_mb: 256, queue_memory_mb: 100, queue_memory_limit_mb: 150 };
    expect(withResourceSpecDefaults(spec)).toEqual({
      cpu: 1,
      cpu_limit: 1,
      memory_mb: 256,
      memory_limit_mb: 512,
      queue_cpu: 3,
      queue_cpu_limit: 6,
      queue_memory_mb: 100,
      queue_memory_limit_mb: 150,
    });
  });

  it('fills null fields, leaves fields without a source alone, and does not change its input', () => {
    const spec: ResourceSpec = { cpu: 1, cpu_limit: null, max_scale: null, labels: { a: 'b' } };
    const before = structuredClone(spec);
    const out = withResourceSpecDefaults(spec);
    expect(out).toEqual({ cpu: 1, cpu_limit: 2, max_scale: null, queue_cpu: 1, queue_cpu_limit: 2, labels: { a: 'b' } });
    expect(out).not.toHaveProperty('queue_max_scale');
    expect(out).not.toHaveProperty('memory_limit_mb');
    expect(spec).toEqual(before);
  });

  it('is the identity on an empty spec', () => {
    expect(withResourceSpecDefaults({})).toEqual({});
  });
});
