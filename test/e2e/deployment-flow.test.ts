import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { dockerBody, githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { testAgent } from '../helpers/test-agent.ts';

describe('the whole flow against a real server on a loopback port', () => {
  let server: ServerProcess;
  let api: Api;
  let fixtures: Awaited<ReturnType<typeof workspaceFixtures>>;

  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '50' });
    api = apiClient(server.url, server.apiKey);
    fixtures = await workspaceFixtures(api);
  });
  afterAll(async () => {
    await server?.kill();
  });

  async function revisionCount(deploymentId: string): Promise<number> {
    const list = await api.get(`/v2/deployments/${deploymentId}/revisions?limit=100`);
    return list.body.resources.length;
  }

  it('creates a github deployment, deploys it, and applies every PATCH rule', async () => {
    const name = uniqueName('gh');
    const created = await api.post('/v2/deployments', githubBody(name, fixtures.integrationId));
    expect(created.status).toBe(201);
    const deployment = created.body;
    expect(deployment).toMatchObject({
      name,
      source: 'github',
      status: 'AWAITING_DATABASE',
      active_revision_id: null,
      source_config: { integration_id: fixtures.integrationId, repo_url: 'https://github.com/acme/agent', deployment_type: 'dev', build_on_push: false },
      source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json', image_uri: null, repo_commit_sha: null },
    });
    expect(deployment.latest_revision_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(deployment.source_config.custom_url).toMatch(new RegExp(`^https://${name}-[0-9a-f]{8}\\.`));
    // Secret values are never echoed back.
    expect(deployment.secrets).toEqual([{ name: 'OPENAI_API_KEY', value: '********' }]);
    expect(JSON.stringify(deployment)).not.toContain('sk-test-secret-value');

    // The tracing project of the same name exists.
    const projects = await api.get(`/v1/tracing-projects?name=${name}`);
    expect(projects.body.resources).toHaveLength(1);
    expect(projects.body.resources[0]).toMatchObject({ name, deployment_id: deployment.id });

    const read = await api.get(`/v2/deployments/${deployment.id}`);
    expect(read.status).toBe(200);
    expect(read.body.id).toBe(deployment.id);

    const first = await revisionReaches(api, deployment.id, deployment.latest_revision_id, ['DEPLOYED']);
    expect(first).toMatchObject({ trigger: 'create', source: 'github', status_message: null, deployment_id: deployment.id });
    const ready = await api.get(`/v2/deployments/${deployment.id}`);
    expect(ready.body).toMatchObject({ status: 'READY', active_revision_id: deployment.latest_revision_id });

    // The sandbox wrote honest build and deploy logs.
    const buildLogs = await api.get(`/v2/deployments/${deployment.id}/revisions/${first.id}/logs?type=build`);
    expect(buildLogs.body.logs.map((l: { message: string }) => l.message).join('\n')).toMatch(
      /sandbox: simulated build of https:\/\/github.com\/acme\/agent@main/,
    );
    const deployLogs = await api.get(`/v2/deployments/${deployment.id}/revisions/${first.id}/logs?type=deploy`);
    expect(deployLogs.body.logs.length).toBeGreaterThan(0);

    // Fields that create no revision.
    let count = await revisionCount(deployment.id);
    for (const sourceConfig of [{ build_on_push: true }, { install_command: 'npm ci' }, { build_command: 'npm run build' }]) {
      const patched = await api.patch(`/v2/deployments/${deployment.id}`, { source_config: sourceConfig });
      expect(patched.status).toBe(200);
      expect(patched.body.latest_revision_id).toBe(deployment.latest_revision_id);
      expect(patched.body.source_config).toMatchObject(sourceConfig);
    }
    expect(await revisionCount(deployment.id)).toBe(count);

    // Each revision field creates exactly one revision, however many are set together.
    const cases: Array<[Record<string, unknown>, Record<string, unknown>]> = [
      [{ source_revision_config: { repo_ref: 'release' } }, { repo_ref: 'release', graph_config_path: 'langgraph.json' }],
      [{ source_revision_config: { graph_config_path: 'agents/graph.json' } }, { repo_ref: 'release', graph_config_path: 'agents/graph.json' }],
      [{ secrets: [{ name: 'NEW_SECRET', value: 'v2' }] }, { repo_ref: 'release', graph_config_path: 'agents/graph.json' }],
      [
        { source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' }, secrets: [{ name: 'A', value: 'b' }] },
        { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      ],
    ];
    let previousLatest = deployment.latest_revision_id;
    for (const [body, expectedConfig] of cases) {
      count = await revisionCount(deployment.id);
      const patched = await api.patch(`/v2/deployments/${deployment.id}`, body);
      expect(patched.status).toBe(200);
      expect(patched.body.latest_revision_id).not.toBe(previousLatest);
      expect(patched.body.source_revision_config).toMatchObject(expectedConfig);
      expect(await revisionCount(deployment.id)).toBe(count + 1);
      const revision = await api.get(`/v2/deployments/${deployment.id}/revisions/${patched.body.latest_revision_id}`);
      expect(revision.body).toMatchObject({ trigger: 'patch', source_revision_config: expectedConfig });
      previousLatest = patched.body.latest_revision_id;
    }
    const last = await revisionReaches(api, deployment.id, previousLatest, ['DEPLOYED']);
    expect(last.status).toBe('DEPLOYED');
    expect((await api.get(`/v2/deployments/${deployment.id}`)).body.active_revision_id).toBe(previousLatest);

    // Roll back to the first revision: a new revision with its config.
    const redeployed = await api.post(`/v2/deployments/${deployment.id}/revisions/${first.id}/redeploy`);
    expect(redeployed.status).toBe(200);
    expect(redeployed.body.source_revision_config).toMatchObject({ repo_ref: 'main', graph_config_path: 'langgraph.json' });
    const rollback = await revisionReaches(api, deployment.id, redeployed.body.latest_revision_id, ['DEPLOYED']);
    expect(rollback.trigger).toBe('redeploy');
    expect(redeployed.body.secrets).toEqual([{ name: 'OPENAI_API_KEY', value: '********' }]);

    // Delete: AWAITING_DELETE, then gone; the tracing project stays unless asked.
    const deleted = await api.delete(`/v2/deployments/${deployment.id}`);
    expect(deleted.status).toBe(204);
    await eventually(async () => ((await api.get(`/v2/deployments/${deployment.id}`)).status === 404 ? true : undefined));
    const remaining = await api.get(`/v1/tracing-projects?name=${name}`);
    expect(remaining.body.resources[0]).toMatchObject({ name, deployment_id: null });
    // The name is free again: a new deployment of it takes the tracing project over (docs/decisions/deleted-deployment-names.md).
    const again = await api.post('/v2/deployments', githubBody(name, fixtures.integrationId));
    expect(again.status).toBe(201);
    expect((await api.get(`/v1/tracing-projects?name=${name}`)).body.resources).toEqual([
      expect.objectContaining({ id: remaining.body.resources[0].id, deployment_id: again.body.id }),
    ]);
  });

  it('creates an external_docker deployment and applies its PATCH rules', async () => {
    const name = uniqueName('img');
    const created = await api.post('/v2/deployments', dockerBody(name, fixtures.listenerId));
    expect(created.status).toBe(201);
    const deployment = created.body;
    expect(deployment.source_config).toMatchObject({ listener_id: fixtures.listenerId, resource_spec: { min_scale: 1, max_scale: 2, cpu: 1, memory_mb: 512 } });
    await revisionReaches(api, deployment.id, deployment.latest_revision_id, ['DEPLOYED']);

    let count = await revisionCount(deployment.id);
    const customUrl = await api.patch(`/v2/deployments/${deployment.id}`, { source_config: { custom_url: 'https://agent.acme.dev' } });
    expect(customUrl.status).toBe(200);
    expect(customUrl.body.source_config.custom_url).toBe('https://agent.acme.dev');
    expect(await revisionCount(deployment.id)).toBe(count);

    const image = await api.patch(`/v2/deployments/${deployment.id}`, { source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.1.0' } });
    expect(image.body.source_revision_config.image_uri).toBe('registry.example.com/acme/agent:1.1.0');
    expect(await revisionCount(deployment.id)).toBe(count + 1);

    count += 1;
    const spec = await api.patch(`/v2/deployments/${deployment.id}`, { source_config: { resource_spec: { max_scale: 5 } } });
    expect(spec.status).toBe(200);
    // resource_spec replaces the stored one whole.
    expect(spec.body.source_config.resource_spec).toEqual({ max_scale: 5 });
    expect(await revisionCount(deployment.id)).toBe(count + 1);

    count += 1;
    const secrets = await api.patch(`/v2/deployments/${deployment.id}`, { secrets: [{ name: 'TOKEN', value: 't' }] });
    expect(secrets.body.secrets).toEqual([{ name: 'TOKEN', value: '********' }]);
    expect(await revisionCount(deployment.id)).toBe(count + 1);

    const final = await revisionReaches(api, deployment.id, secrets.body.latest_revision_id, ['DEPLOYED']);
    expect(final.source_revision_config.image_uri).toBe('registry.example.com/acme/agent:1.1.0');
    const list = await api.get(`/v2/deployments?name_contains=${name}`);
    expect(list.body.resources.map((d: { id: string }) => d.id)).toEqual([deployment.id]);

    const deleted = await api.delete(`/v2/deployments/${deployment.id}?delete_tracing_project=true`);
    expect(deleted.status).toBe(204);
    expect((await api.get(`/v2/deployments/${deployment.id}`)).body.status).toBe('AWAITING_DELETE');
    await eventually(async () => ((await api.get(`/v2/deployments/${deployment.id}`)).status === 404 ? true : undefined));
    expect((await api.get(`/v1/tracing-projects?name=${name}`)).body.resources).toEqual([]);
  });

  it('concurrent DELETEs start one teardown; the deployment is gone and its queued revisions never start', async () => {
    // On a local listener whose agent is this test: the teardown waits for the agent's report, so the
    // three DELETEs all meet the deployment being deleted however late the machine lets the third
    // one in (a sandbox teardown of one 50 ms stage was over before it, at load 25: a 404).
    const agent = await testAgent(server.url, api);
    const created = await api.post('/v2/deployments', dockerBody(uniqueName('del'), agent.listenerId));
    const id = created.body.id;
    const queued = (await api.patch(`/v2/deployments/${id}`, { secrets: [{ name: 'Q', value: '1' }] })).body.latest_revision_id;
    const answers = await Promise.all([1, 2, 3].map(() => api.delete(`/v2/deployments/${id}`)));
    expect(answers.map((a) => a.status)).toEqual([204, 204, 204]);
    expect((await api.get(`/v2/deployments/${id}`)).body.status).toBe('AWAITING_DELETE');
    // One teardown is offered, and no revision: the queued ones never start.
    const teardown = await agent.claim(10);
    expect(teardown).toMatchObject({ kind: 'teardown', deployment: { id } });
    expect(await agent.claim(0)).toBeNull();
    await agent.teardownDone(teardown!);
    await eventually(async () => ((await api.get(`/v2/deployments/${id}`)).status === 404 ? true : undefined));
    expect(queued).not.toBe(created.body.latest_revision_id);
  });

  it('fails a stage on request and says why', async () => {
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('fail'), fixtures.integrationId, { secrets: [{ name: 'SANDBOX_FAIL_STAGE', value: 'build' }] }),
    );
    const failed = await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['BUILD_FAILED', 'DEPLOYED']);
    expect(failed.status).toBe('BUILD_FAILED');
    expect(failed.status_message).toMatch(/SANDBOX_FAIL_STAGE=build/);
    expect((await api.get(`/v2/deployments/${created.body.id}`)).body).toMatchObject({ status: 'AWAITING_DATABASE', active_revision_id: null });
  });
});
