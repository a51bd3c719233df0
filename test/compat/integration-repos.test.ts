import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver } from '../webhooks/github.ts';

/** `GET /v1/integrations/github/{id}/repos` fed by real, signed deliveries to the webhook. */
describe('integration repos from GitHub deliveries', () => {
  const secret = 'repos-webhook-secret';
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({ GITHUB_WEBHOOK_SECRET: secret, RECONCILE_INTERVAL_MS: '0' });
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('installation and installation_repositories deliveries set the list the route answers', async () => {
    const api = apiClient(server.url, server.apiKey);
    const installationId = 700_000 + Math.floor(Math.random() * 100_000);
    const integration = await api.post('/v1/integrations/github', { installation_id: installationId, name: 'acme' });
    expect(integration.status).toBe(201);
    const installation = { id: installationId, account: { login: 'acme', id: 1 } };
    const created = await deliver(
      server.url,
      'installation',
      { action: 'created', installation, repositories: [{ id: 11, name: 'agent', full_name: 'acme/agent', private: true }] },
      { secret },
    );
    expect(created.status).toBe(202);
    const added = await deliver(
      server.url,
      'installation_repositories',
      {
        action: 'added',
        installation,
        repository_selection: 'selected',
        repositories_added: [{ id: 12, name: 'tools', full_name: 'acme/tools', private: false }],
        repositories_removed: [],
      },
      { secret },
    );
    expect(added.status).toBe(202);
    const repos = await eventually(async () => {
      const response = await api.get(`/v1/integrations/github/${integration.body.id}/repos`);
      return response.body.length === 2 ? response.body : undefined;
    });
    expect(repos).toEqual([
      { host_integration_id: integration.body.id, id: 11, name: 'agent', owner: 'acme', url: 'https://github.com/acme/agent', default_branch: 'main' },
      { host_integration_id: integration.body.id, id: 12, name: 'tools', owner: 'acme', url: 'https://github.com/acme/tools', default_branch: 'main' },
    ]);
    // An unsigned delivery changes nothing.
    expect(
      (await deliver(server.url, 'installation_repositories', { action: 'removed', installation, repositories_added: [], repositories_removed: [{ id: 11 }] }))
        .status,
    ).toBe(401);
    await new Promise((r) => setTimeout(r, 100));
    expect((await api.get(`/v1/integrations/github/${integration.body.id}/repos`)).body).toHaveLength(2);
    expect((await api.get(`/v1/integrations/github/${crypto.randomUUID()}/repos`)).status).toBe(404);
  });
});
