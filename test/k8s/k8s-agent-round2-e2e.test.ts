import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABELS } from '../../agent/k8s/labels.ts';
import { type Api, apiClient } from '../helpers/api.ts';
import { revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { KubernetesApiStandIn } from './api-stand-in.ts';
import { grantDocumentedRole, type K8sAgentProcess, k8sListener, startK8sAgent } from './harness.ts';

const NAMESPACE = 'restricted-ns';

/**
 * Contract §18 end to end: the real control plane and the real agent process against the
 * Kubernetes API stand-in, a SIMULATED cluster whose controllers move one step per pass (every 50
 * ms here), in a namespace that enforces Pod Security `restricted`, with the documented Role only.
 */
describe('k8s agent round 2 against the simulated cluster (contract §18)', () => {
  const standIn = new KubernetesApiStandIn([NAMESPACE]);
  let server: ServerProcess;
  let api: Api;
  let agent: K8sAgentProcess;
  let listenerId: string;

  beforeAll(async () => {
    await standIn.start();
    standIn.enforcePodSecurityRestricted(NAMESPACE);
    grantDocumentedRole(standIn, 'agent-token', [NAMESPACE]);
    server = await startServerProcess({ RECONCILE_INTERVAL_MS: '0', AGENT_LEASE_MS: '3000' });
    api = apiClient(server.url, server.apiKey);
    const listener = await k8sListener(api, [NAMESPACE]);
    listenerId = listener.listenerId;
    agent = await startK8sAgent({
      url: server.url,
      token: listener.token,
      listenerId,
      kubeconfig: standIn.kubeconfig('agent-token', NAMESPACE),
      args: [
        '--namespace',
        NAMESPACE,
        '--rollout-timeout',
        '60',
        '--postgres-image',
        'mirror.example.com/pgvector:pg16',
        '--redis-image',
        'mirror.example.com/redis:7',
      ],
    });
    standIn.startControllers(50);
  });
  afterAll(async () => {
    standIn.stopControllers();
    await agent?.stop();
    await server?.kill('SIGTERM');
    await standIn.stop();
  });

  const deploy = async (image: string, spec: Record<string, unknown> = {}) => {
    const created = await api.post('/v2/deployments', {
      name: uniqueName('r2'),
      source: 'external_docker',
      source_config: { listener_id: listenerId, resource_spec: spec },
      source_revision_config: { image_uri: image },
    });
    expect(created.status).toBe(201);
    const revision = await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED', 'DEPLOY_FAILED'], 60_000);
    return { id: created.body.id as string, revision };
  };

  it('every rendered pod is admitted in a namespace enforcing Pod Security restricted, DEPLOYED comes only once no old pod is left, the data stores from --postgres-image / --redis-image', async () => {
    const { id, revision } = await deploy('registry.example.com/acme/bot:1');
    expect(revision.status).toBe('DEPLOYED');
    const apiServer = standIn.objects('Deployment', NAMESPACE, `${LABELS.deploymentId}=${id},${LABELS.component}=api-server`)[0]!;
    expect(apiServer.status).toMatchObject({ replicas: 1, updatedReplicas: 1, availableReplicas: 1 });
    const postgres = standIn.objects('StatefulSet', NAMESPACE, `${LABELS.deploymentId}=${id}`)[0]!;
    expect(postgres.status).toMatchObject({ readyReplicas: 1 });
    // --postgres-image / --redis-image: the data stores come from the operator's mirror.
    expect(postgres.spec.template.spec.containers[0].image).toBe('mirror.example.com/pgvector:pg16');
    expect(standIn.objects('Deployment', NAMESPACE, `${LABELS.deploymentId}=${id},${LABELS.component}=redis`)[0]!.spec.template.spec.containers[0].image).toBe(
      'mirror.example.com/redis:7',
    );
  });

  it('an image that exits twice while its database starts, then runs: DEPLOYED (CrashLoopBackOff fails only after 3 restarts)', async () => {
    standIn.imageFate = (image) => (image.endsWith(':slow-start') ? { pull: 'crash', message: 'could not connect to postgres', times: 2 } : { pull: 'ok' });
    try {
      expect((await deploy('registry.example.com/acme/bot:slow-start')).revision.status).toBe('DEPLOYED');
    } finally {
      standIn.imageFate = () => ({ pull: 'ok' });
    }
  });

  it('failures named from the cluster, not timed out: crash loop, invalid image name, a missing service account (FailedCreate), an unschedulable pod', async () => {
    standIn.imageFate = (image) =>
      image.endsWith(':crash')
        ? { pull: 'crash', message: 'exit 1' }
        : image.endsWith(':Bad')
          ? { pull: 'fail', reason: 'InvalidImageName', message: 'invalid reference format' }
          : { pull: 'ok' };
    standIn.unschedulable = (spec) => (spec.containers[0]?.image.endsWith(':huge') ? '0/3 nodes are available: 3 Insufficient cpu.' : null);
    try {
      const crash = await deploy('registry.example.com/acme/bot:crash');
      expect(crash.revision.status).toBe('DEPLOY_FAILED');
      expect(crash.revision.status_message).toMatch(/CrashLoopBackOff after \d+ restarts/);
      const badName = await deploy('registry.example.com/acme/bot:Bad');
      expect(badName.revision.status_message).toContain('InvalidImageName: invalid reference format');
      const noAccount = await deploy('registry.example.com/acme/bot:1', { service_account_name: 'ghost' });
      expect(noAccount.revision.status).toBe('DEPLOY_FAILED');
      expect(noAccount.revision.status_message).toContain('ReplicaFailure FailedCreate');
      expect(noAccount.revision.status_message).toContain('serviceaccount "ghost" not found');
      const huge = await deploy('registry.example.com/acme/bot:huge');
      expect(huge.revision.status_message).toContain('Unschedulable: 0/3 nodes are available: 3 Insufficient cpu.');
      // Each named by the cluster's own reason, not by the rollout deadline.
      for (const failed of [crash, badName, noAccount, huge]) expect(failed.revision.status_message).not.toContain('did not finish within');
    } finally {
      standIn.imageFate = () => ({ pull: 'ok' });
      standIn.unschedulable = () => null;
    }
  });

  it('a pull failure mid-rollout: DEPLOY_FAILED while the previous revision keeps serving; the old env Secret stays for the old pods', async () => {
    const { id } = await deploy('registry.example.com/acme/bot:1');
    standIn.imageFate = (image) => (image.endsWith(':gone') ? { pull: 'fail', reason: 'ErrImagePull', message: 'not found' } : { pull: 'ok' });
    try {
      await api.patch(`/v2/deployments/${id}`, { source_revision_config: { image_uri: 'registry.example.com/acme/bot:gone' } });
      const latest = (await api.get(`/v2/deployments/${id}/revisions?limit=1`)).body.resources[0];
      const failed = await revisionReaches(api, id, latest.id, ['DEPLOYED', 'DEPLOY_FAILED'], 60_000);
      expect(failed.status).toBe('DEPLOY_FAILED');
      const pods = standIn.objects('Pod', NAMESPACE, `${LABELS.deploymentId}=${id},${LABELS.component}=api-server`);
      const serving = pods.filter((p) => p.status.conditions?.some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True'));
      expect(serving).toHaveLength(1);
      const secretOfServing = serving[0]!.spec.containers[0].envFrom[0].secretRef.name as string;
      expect(standIn.get('Secret', NAMESPACE, secretOfServing)).toBeDefined();
    } finally {
      standIn.imageFate = () => ({ pull: 'ok' });
    }
  });
});
