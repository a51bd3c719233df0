import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

/**
 * The Python example on the hosted API's reference page ("CI/CD with the control plane API"), call
 * for call, against the real server in a child process: the statuses it insists on (201, 200, 204),
 * `resources[0]` as the newest revision, and a poll until DEPLOYED that treats any *FAILED as an error.
 */
describe("the hosted API reference page's Python example", () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '30' });
  });
  afterAll(async () => {
    await server?.kill();
  });

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
    const response = await fetch(server.url + path, {
      method,
      headers: { 'X-Api-Key': server.apiKey, ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, json: text ? JSON.parse(text) : null };
  }

  async function waitDeployed(deploymentId: string, revisionId: string): Promise<void> {
    for (let i = 0; i < 500; i++) {
      const { status, json } = await call('GET', `/v2/deployments/${deploymentId}/revisions/${revisionId}`);
      expect(status).toBe(200);
      if (json.status === 'DEPLOYED') return;
      if (String(json.status).includes('FAILED')) throw new Error(`revision ${revisionId} ${json.status}: ${json.status_message}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    throw new Error('never DEPLOYED');
  }

  it('create my_deployment → 201; revisions newest first; poll to DEPLOYED; PATCH → 200; DELETE → 204', async () => {
    // The example's integration_id comes from the GitHub App installation the user linked.
    const integration = await call('POST', '/v1/integrations/github', { installation_id: 4242, name: 'acme' });
    expect(integration.status).toBe(201);

    const created = await call('POST', '/v2/deployments', {
      name: 'my_deployment',
      source: 'github',
      source_config: {
        integration_id: integration.json.id,
        repo_url: 'https://github.com/acme/agent',
        deployment_type: 'dev',
        build_on_push: false,
        custom_url: null,
        resource_spec: null,
      },
      source_revision_config: { repo_ref: 'main', langgraph_config_path: 'langgraph.json', image_uri: null },
      secrets: [
        { name: 'OPENAI_API_KEY', value: 'sk-1' },
        { name: 'ANTHROPIC_API_KEY', value: 'sk-2' },
        { name: 'TAVILY_API_KEY', value: 'tv-3' },
      ],
    });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const deploymentId: string = created.json.id;
    expect(created.json.name).toBe('my_deployment');
    expect(created.json.source_revision_config.langgraph_config_path).toBe('langgraph.json');

    const revisions = await call('GET', `/v2/deployments/${deploymentId}/revisions`);
    expect(revisions.status).toBe(200);
    const first: string = revisions.json.resources[0].id;
    expect(first).toBe(created.json.latest_revision_id);
    await waitDeployed(deploymentId, first);

    const patched = await call('PATCH', `/v2/deployments/${deploymentId}`, {
      source_config: { build_on_push: true },
      source_revision_config: { repo_ref: 'main', langgraph_config_path: 'langgraph.json' },
    });
    expect(patched.status).toBe(200);
    const afterPatch = await call('GET', `/v2/deployments/${deploymentId}/revisions`);
    const newest: string = afterPatch.json.resources[0].id;
    expect(newest).not.toBe(first);
    expect(afterPatch.json.resources[1].id).toBe(first);
    await waitDeployed(deploymentId, newest);
    expect((await call('GET', `/v2/deployments/${deploymentId}`)).json.source_config.build_on_push).toBe(true);

    const deleted = await call('DELETE', `/v2/deployments/${deploymentId}`);
    expect(deleted.status).toBe(204);
  });
});
