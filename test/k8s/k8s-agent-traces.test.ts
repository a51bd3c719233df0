import { afterAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api.ts';
import { revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { agentStepsOfTrace, newTraceparent, standInCollector } from '../helpers/otlp-collector.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { KubernetesApiStandIn } from './api-stand-in.ts';
import { grantDocumentedRole, type K8sAgentProcess, k8sListener, startK8sAgent } from './harness.ts';

const NAMESPACE = 'team-a';

/**
 * Contract §17 for the `k8s` agent: with OTEL_EXPORTER_OTLP_ENDPOINT set, its apply and rollout of
 * a revision are spans of the trace of the request that made it. The real server and agent
 * processes export to a stand-in collector on loopback. SIMULATED: the Kubernetes API server
 * (test/k8s/api-stand-in.ts, its controllers making pods ready).
 */
describe("the k8s agent's spans join the trace of the request that made the revision", () => {
  const standIn = new KubernetesApiStandIn([NAMESPACE]);
  let collector: Awaited<ReturnType<typeof standInCollector>> | undefined;
  let server: ServerProcess | undefined;
  let agent: K8sAgentProcess | undefined;

  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await server?.kill('SIGTERM');
    await standIn.stop();
    collector?.server.close();
  });

  it('apply and rollout are children of the create’s request span, one trace id with the server’s spans', async () => {
    collector = await standInCollector();
    const otel = (service: string) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: collector!.url, OTEL_SERVICE_NAME: service });
    await standIn.start();
    grantDocumentedRole(standIn, 'agent-sa-token', [NAMESPACE]);
    server = await startServerProcess({ RECONCILE_INTERVAL_MS: '0', ...otel('acp-test') });
    const api = apiClient(server.url, server.apiKey);
    const listener = await k8sListener(api, [NAMESPACE]);
    const kubeconfig = standIn.kubeconfig('agent-sa-token', NAMESPACE);
    agent = await startK8sAgent({ url: server.url, token: listener.token, listenerId: listener.listenerId, kubeconfig, env: otel('k8s-agent-test') });
    standIn.startControllers(50);
    const { traceparent, traceId } = newTraceparent();
    const created = await api.post(
      '/v2/deployments',
      {
        name: uniqueName('k8s-traced'),
        source: 'external_docker',
        source_config: { listener_id: listener.listenerId, listener_config: { k8s_namespace: NAMESPACE } },
        source_revision_config: { image_uri: 'registry.example.com/acme/bot:1' },
        secrets: [{ name: 'LANGSMITH_API_KEY', value: 'lsv2-traced' }],
      },
      { traceparent },
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const deployed = await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED', 'DEPLOY_FAILED'], 30_000);
    expect(deployed.status, deployed.status_message).toBe('DEPLOYED');

    await agentStepsOfTrace(collector.spans, { traceId, service: 'k8s-agent-test', steps: ['apply', 'rollout'], revisionId: deployed.id });
  });
});
