import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@langchain/langgraph-sdk';
import { afterAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { type AgentProcess, graphRepo, hostFetch, killLeftoverServers, LINK_AGENT_MODULES, localScene, startAgent } from './harness.ts';

/**
 * Deployment URLs need a key, as on the hosted product (contract §15): the real control plane, a
 * real agent (sandboxed) with its proxy checking keys through POST /v2/agent/verify-key, the
 * LangGraph.js API server, and the LangGraph SDK as a user would call it.
 */
describe('X-Api-Key on deployment URLs', () => {
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-keys-'));

  afterAll(async () => {
    await agent?.stop('SIGINT');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  it('refuses no key (401, WWW-Authenticate) and another workspace’s key (403), serves its own keys and the SDK, keeps GET /ok open, and refuses a revoked key within the cache time', {
    timeout: 600_000,
  }, async () => {
    const scene = await localScene();
    server = scene.server;
    const { api, workspaceId, integrationId, listenerId, token } = scene;
    // Answers kept 2 s here (at most 30 s in production), so the revoked key's refusal comes quickly.
    agent = await startAgent({ url: server.url, token, listenerId, workDir, requireKeys: true, args: ['--key-cache-seconds', '2'] });
    expect(agent.output()).not.toContain('--public');
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('keys'), integrationId, {
        source_config: {
          integration_id: integrationId,
          repo_url: graphRepo().url,
          deployment_type: 'dev',
          build_on_push: false,
          install_command: LINK_AGENT_MODULES,
        },
      }),
    );
    expect(created.status).toBe(201);
    const revision = await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(revision.status, `${revision.status_message}\n${agent.output()}`).toBe('DEPLOYED');
    // The deployment's URL as given (the path form on the proxy, the agent's default): `/d/<name>`.
    const deployment = (await api.get(`/v2/deployments/${created.body.id}`)).body;
    const host = deployment.source_config.custom_url;
    const search = (key?: string) =>
      hostFetch(agent!.proxyPort, host, '/assistants/search', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}) },
        body: '{}',
      });

    // Health stays open; everything else needs a key.
    expect((await hostFetch(agent.proxyPort, host, '/ok')).status).toBe(200);
    const none = await search();
    expect(none.status).toBe(401);
    expect(none.body.detail).toMatch(/X-Api-Key/);
    const challenged = await fetch(`http://127.0.0.1:${agent.proxyPort}/d/${deployment.name}/info`);
    expect(challenged.status).toBe(401);
    expect(challenged.headers.get('www-authenticate')).toMatch(/X-Api-Key/);
    expect((await search('not-a-key-of-anyone')).status).toBe(401);

    // The organization's key and a key of the deployment's own workspace are served.
    expect((await search(server.apiKey)).status).toBe(200);
    const own = await api.post('/v1/api-keys', { workspace_id: workspaceId, description: 'own workspace' });
    expect(own.status).toBe(201);
    expect((await search(own.body.key)).status).toBe(200);

    // Another workspace's key: valid, but not for this deployment.
    const other = await api.post('/v1/workspaces', { name: `other-${crypto.randomUUID().slice(0, 6)}` });
    expect(other.status).toBe(201);
    const otherKey = await api.post('/v1/api-keys', { workspace_id: other.body.id, description: 'another workspace' });
    expect(otherKey.status).toBe(201);
    const refused = await search(otherKey.body.key);
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toMatch(/another workspace/);

    // The LangGraph SDK, unchanged, with its api_key: through the path form of the URL.
    const apiUrl = `http://127.0.0.1:${agent.proxyPort}/d/${deployment.name}`;
    const sdk = new Client({ apiUrl, apiKey: own.body.key });
    const assistants = await sdk.assistants.search({ graphId: 'agent' });
    expect(assistants.length).toBeGreaterThan(0);
    const thread = await sdk.threads.create();
    const result = (await sdk.runs.wait(thread.thread_id, 'agent', { input: {} })) as Record<string, unknown>;
    expect(result.answer).toBe('the first answer');
    await expect(new Client({ apiUrl, apiKey: otherKey.body.key, callerOptions: { maxRetries: 0 } }).threads.create()).rejects.toThrow(/403/);

    // Revoked: refused once the agent's kept answer ends (2 s here; the flag allows at most 30 s).
    expect((await apiClient(server.url, server.apiKey).delete(`/v1/api-keys/${own.body.id}`)).status).toBe(204);
    await eventually(async () => ((await search(own.body.key)).status === 401 ? true : undefined), 30_000, 250);
  });
});
