import type { Api } from './api.ts';
import { eventually } from './api.ts';

let counter = 0;
/** A valid, unique deployment name. */
export function uniqueName(prefix = 'dep'): string {
  counter += 1;
  return `${prefix}-${Date.now().toString(36)}-${counter}`;
}

/** Links a GitHub installation and finds the workspace's sandbox listener. */
export async function workspaceFixtures(api: Api, installationId = 1000 + Math.floor(Math.random() * 1e6)) {
  const integration = await api.post('/v1/integrations/github', { installation_id: installationId, name: 'acme' });
  if (integration.status !== 201) throw new Error(`integration: ${integration.status} ${JSON.stringify(integration.body)}`);
  const listeners = await api.get('/v2/listeners');
  const sandbox = listeners.body.resources.find((l: { compute_type: string }) => l.compute_type === 'sandbox');
  if (!sandbox) throw new Error('no sandbox listener');
  return { integrationId: integration.body.id as string, installationId, listenerId: sandbox.id as string };
}

export function githubBody(name: string, integrationId: string, overrides: Record<string, unknown> = {}) {
  return {
    name,
    source: 'github',
    source_config: { integration_id: integrationId, repo_url: 'https://github.com/acme/agent', deployment_type: 'dev', build_on_push: false },
    source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
    secrets: [{ name: 'OPENAI_API_KEY', value: 'sk-test-secret-value' }],
    ...overrides,
  };
}

export function dockerBody(name: string, listenerId: string, overrides: Record<string, unknown> = {}) {
  return {
    name,
    source: 'external_docker',
    source_config: { listener_id: listenerId, resource_spec: { min_scale: 1, max_scale: 2, cpu: 1, memory_mb: 512 } },
    source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.0.0' },
    secrets: [],
    ...overrides,
  };
}

/** Waits until the revision reaches one of `statuses`, and answers it. */
export function revisionReaches(api: Api, deploymentId: string, revisionId: string, statuses: string[], timeoutMs = 20_000) {
  return eventually(async () => {
    const response = await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}`);
    return statuses.includes(response.body.status) ? response.body : undefined;
  }, timeoutMs);
}
