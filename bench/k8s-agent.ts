/**
 * The k8s agent's own costs, measured against the Kubernetes API stand-in (test/k8s/api-stand-in.ts,
 * a SIMULATION of an API server: its figures say what the agent and the control plane add, not what
 * a real cluster takes, where pulling images and starting pods dominate).
 *
 * 1. Rendering: renderRevision + schema validation of every object, for a full ResourceSpec.
 * 2. Create → DEPLOYED: the real server and the real agent process (`--poll-interval 0.1`), the
 *    stand-in's controllers ticking every 20 ms; the time from the create's answer to the revision
 *    read back as DEPLOYED (polled every 20 ms), and the Kubernetes API requests the agent made.
 *
 *   node bench/k8s-agent.ts           # RUNS=10 deployments, RENDERS=2000
 */
import { renderRevision } from '../agent/k8s/render.ts';
import { schemaErrors } from '../agent/k8s/schemas.ts';
import { apiClient } from '../test/helpers/api.ts';
import { startServerProcess } from '../test/helpers/server-process.ts';
import { KubernetesApiStandIn } from '../test/k8s/api-stand-in.ts';
import { grantDocumentedRole, k8sListener, startK8sAgent } from '../test/k8s/harness.ts';

const runs = Number(process.env.RUNS ?? 10);
const renders = Number(process.env.RENDERS ?? 2000);

const spec = {
  min_scale: 2,
  max_scale: 5,
  cpu: 1,
  memory_mb: 1024,
  queue_cpu: 0.5,
  redis_memory_mb: 256,
  db_cpu: 0.25,
  db_memory_mb: 512,
  db_storage_gi: 20,
  db_max_connections: 200,
  labels: { team: 'acme' },
  annotations: { owner: 'ops' },
  service_account_name: 'runner',
  image_pull_secrets: [{ name: 'regcred' }],
  volumes: [{ name: 'cache', emptyDir: {} }],
  volume_mounts: [{ name: 'cache', mountPath: '/cache' }],
  init_containers: [{ name: 'migrate', image: 'm:1' }],
  sidecars: [{ name: 'shipper', image: 's:1', restartPolicy: 'Always' as const }],
};
const input = {
  deployment: { id: '0b8c3f5e-1111-4222-8333-444455556666', name: 'bench' },
  revision: { id: 'r', image: 'i:1', secrets: [{ name: 'K', value: 'v' }] },
  namespace: 'team-a',
  spec,
  postgresPassword: 'pw',
  redisPassword: 'rpw',
};
for (let i = 0; i < 200; i++) renderRevision(input).forEach((o) => schemaErrors(o));
let started = performance.now();
for (let i = 0; i < renders; i++) renderRevision(input);
const renderUs = ((performance.now() - started) * 1000) / renders;
started = performance.now();
for (let i = 0; i < renders; i++) for (const object of renderRevision(input)) schemaErrors(object);
const renderValidateUs = ((performance.now() - started) * 1000) / renders;
console.log(
  `render: ${renderUs.toFixed(1)} µs per revision (${renderRevision(input).length} objects); render + schema validation: ${renderValidateUs.toFixed(0)} µs`,
);

const standIn = await new KubernetesApiStandIn(['team-a']).start();
grantDocumentedRole(standIn, 'bench-token', ['team-a']);
standIn.startControllers(20);
const server = await startServerProcess({ RECONCILE_INTERVAL_MS: '0' });
const api = apiClient(server.url, server.apiKey);
const listener = await k8sListener(api, ['team-a']);
const agent = await startK8sAgent({
  url: server.url,
  token: listener.token,
  listenerId: listener.listenerId,
  kubeconfig: standIn.kubeconfig('bench-token', 'team-a'),
  args: ['--namespace', 'team-a'],
});
const times: number[] = [];
const requests: number[] = [];
try {
  for (let i = 0; i < runs; i++) {
    const before = standIn.requests.length;
    const created = await api.post('/v2/deployments', {
      name: `bench-${i}-${Date.now()}`,
      source: 'external_docker',
      source_config: { listener_id: listener.listenerId, listener_config: { k8s_namespace: 'team-a' }, resource_spec: { min_scale: 1, max_scale: 1 } },
      source_revision_config: { image_uri: 'registry.example.com/bench:1' },
    });
    const answered = performance.now();
    for (;;) {
      const revision = await api.get(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
      if (revision.body.status === 'DEPLOYED') break;
      if (revision.body.status === 'DEPLOY_FAILED') throw new Error(revision.body.status_message);
      await new Promise((r) => setTimeout(r, 20));
    }
    times.push(performance.now() - answered);
    requests.push(standIn.requests.length - before);
  }
} finally {
  await agent.stop();
  await server.kill();
  await standIn.stop();
}
const sorted = [...times].sort((a, b) => a - b);
const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
console.log(
  `create → DEPLOYED (${runs} runs): median ${at(0.5).toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms; Kubernetes API requests per deployment: median ${[...requests].sort((a, b) => a - b)[Math.floor(requests.length / 2)]}`,
);
