import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { agentStepsOfTrace, newTraceparent, standInCollector } from '../helpers/otlp-collector.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { type AgentProcess, graphRepo, killLeftoverServers, LINK_AGENT_MODULES, localScene, startAgent } from './harness.ts';

/**
 * Contract §17: one trace across the control plane and the `local` agent. The server and the real
 * agent (real git, the LangGraph.js server; its packages the agent's own, linked) both export to a stand-in OTLP collector on
 * loopback; a create sent with a `traceparent` yields spans of that one trace id from both, the
 * agent's install, build and start among them, under the create's request span.
 */
describe("the local agent's spans join the trace of the request that made the revision", () => {
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  let collector: Awaited<ReturnType<typeof standInCollector>> | undefined;
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-traces-'));

  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await server?.kill('SIGTERM');
    collector?.server.close();
    killLeftoverServers(workDir);
  });

  it('one deploy: server and agent spans of one trace id, install, build and start children of the POST', { timeout: 600_000 }, async () => {
    collector = await standInCollector();
    const otel = (service: string) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: collector!.url, OTEL_SERVICE_NAME: service });
    const scene = await localScene(otel('acp-test'));
    server = scene.server;
    const { api, integrationId, listenerId, token } = scene;
    agent = await startAgent({ url: server.url, token, listenerId, workDir, env: otel('local-agent-test') });
    const repo = graphRepo();
    const { traceparent, traceId } = newTraceparent();
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('traced'), integrationId, {
        source_config: {
          integration_id: integrationId,
          repo_url: repo.url,
          deployment_type: 'dev',
          build_on_push: false,
          build_command: 'true',
          install_command: LINK_AGENT_MODULES,
        },
      }),
      { traceparent },
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const deployed = await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(deployed.status, deployed.status_message).toBe('DEPLOYED');

    const trace = await agentStepsOfTrace(collector.spans, {
      traceId,
      service: 'local-agent-test',
      steps: ['install', 'build', 'start'],
      revisionId: deployed.id,
    });
    expect(trace.find((s) => s.name === 'POST /v2/deployments')?.service).toBe('acp-test');
    // The server's side of the same revision: its stage changes, reported by the agent.
    expect(trace.filter((s) => s.service === 'acp-test').map((s) => s.name)).toEqual(
      expect.arrayContaining(['revision BUILDING', 'revision DEPLOYING', 'revision DEPLOYED']),
    );
  });
});
