import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { readBody, runAction, startFlakyProxy } from './harness.ts';

describe('the bundled Action against a real server', () => {
  let server: ServerProcess;
  let api: Api;
  let fx: Awaited<ReturnType<typeof workspaceFixtures>>;
  const base = () => ({ 'api-url': server.url, 'api-key': server.apiKey });

  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '50' });
    api = apiClient(server.url, server.apiKey);
    fx = await workspaceFixtures(api);
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('creates a deployment, waits for DEPLOYED and writes the outputs and the summary; a second run PATCHes it by name', async () => {
    const name = uniqueName('act');
    const first = await runAction({
      ...base(),
      name,
      'image-uri': 'registry.example.com/acme/agent:1',
      'listener-id': fx.listenerId,
      secrets: 'OPENAI_API_KEY=sk-very-secret-1\n\n# a comment\nOTHER=x=y',
    });
    expect(first.code, first.stdout + first.stderr).toBe(0);
    expect(first.outputs.status).toBe('DEPLOYED');
    const deploymentId = first.outputs['deployment-id']!;
    const revisionId = first.outputs['revision-id']!;
    expect(deploymentId).toMatch(/^[0-9a-f-]{36}$/);
    const revision = await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}`);
    expect(revision.body).toMatchObject({ status: 'DEPLOYED', trigger: 'create' });
    expect((await api.get(`/v2/deployments/${deploymentId}`)).body.secrets.map((s: { name: string }) => s.name)).toEqual(['OPENAI_API_KEY', 'OTHER']);
    // Masked: the runner is told to hide the key and every secret value.
    expect(first.stdout).toContain(`::add-mask::${server.apiKey}`);
    expect(first.stdout).toContain('::add-mask::sk-very-secret-1');
    expect(first.stdout).toContain('::add-mask::x=y');
    expect(first.stdout.replaceAll(`::add-mask::${server.apiKey}`, '')).not.toContain(server.apiKey);
    // The summary: deployment, revision, each transition with its time.
    expect(first.summary).toContain(name);
    expect(first.summary).toContain(revisionId);
    expect(first.summary).toMatch(/<td>DEPLOYED<\/td><td>\d{4}-\d\d-\d\dT[\d:.]+Z<\/td>/);

    const second = await runAction({ ...base(), name, source: 'external_docker', 'image-uri': 'registry.example.com/acme/agent:2' });
    expect(second.code, second.stdout + second.stderr).toBe(0);
    expect(second.outputs['deployment-id']).toBe(deploymentId);
    expect(second.outputs['revision-id']).not.toBe(revisionId);
    expect(second.stdout).toContain('patched');
    const patched = await api.get(`/v2/deployments/${deploymentId}/revisions/${second.outputs['revision-id']}`);
    expect(patched.body).toMatchObject({ status: 'DEPLOYED', trigger: 'patch', source_revision_config: { image_uri: 'registry.example.com/acme/agent:2' } });
    const same = await api.get(`/v2/deployments?name_contains=${name}`);
    expect(same.body.resources).toHaveLength(1);
    // Secrets were not given the second time: the stored ones stay.
    expect((await api.get(`/v2/deployments/${deploymentId}`)).body.secrets).toHaveLength(2);
  });

  it('by deployment-id: a PATCH that creates no revision says so and succeeds without waiting; inputs of the other source are refused', async () => {
    const first = await runAction({ ...base(), name: uniqueName('byid'), 'image-uri': 'registry.example.com/acme/agent:1' });
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const deploymentId = first.outputs['deployment-id']!;
    const revisionsBefore = (await api.get(`/v2/deployments/${deploymentId}/revisions`)).body.resources.length;

    const run = await runAction({ ...base(), 'deployment-id': deploymentId, 'custom-url': 'https://agent.example.com' });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toMatch(/PATCH changed no revision field, so no revision was created; nothing to wait for/);
    expect(run.outputs).toMatchObject({ 'deployment-id': deploymentId, 'revision-id': '', status: 'UNCHANGED', url: 'https://agent.example.com' });
    expect((await api.get(`/v2/deployments/${deploymentId}/revisions`)).body.resources.length).toBe(revisionsBefore);
    expect(run.summary).toContain('No new revision');

    const wrong = await runAction({ ...base(), 'deployment-id': deploymentId, 'repo-ref': 'main' });
    expect(wrong.code).toBe(1);
    expect(wrong.stdout).toMatch(/has source external_docker, which cannot change, but the inputs .* are for github/);
    expect(wrong.outputs['deployment-id'] ?? '').toBe('');
  });

  it('deploys a github source on the workflow branch and outputs its URL', async () => {
    const name = uniqueName('gh');
    const run = await runAction(
      { ...base(), name, 'repo-url': 'https://github.com/acme/agent', 'graph-config-path': 'langgraph.json', 'integration-id': fx.integrationId },
      { GITHUB_REF_NAME: 'feature-x' },
    );
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.outputs.status).toBe('DEPLOYED');
    expect(run.outputs.url).toMatch(new RegExp(`^https://${name}-[0-9a-f]{8}\\.`));
    const revision = await api.get(`/v2/deployments/${run.outputs['deployment-id']}/revisions/${run.outputs['revision-id']}`);
    expect(revision.body.source_revision_config.repo_ref).toBe('feature-x');
    expect(run.stdout).toMatch(/Z {2}DEPLOYED/);
    expect(run.summary).toContain(run.outputs.url!);
  });

  it('fails with the reason, the last log lines and an annotation when the revision fails, and still writes the outputs', async () => {
    const name = uniqueName('fail');
    const run = await runAction({ ...base(), name, 'image-uri': 'registry.example.com/acme/agent:1', secrets: 'SANDBOX_FAIL_STAGE=deploy' });
    expect(run.code).toBe(1);
    expect(run.outputs.status).toBe('DEPLOY_FAILED');
    expect(run.outputs['deployment-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(run.outputs['revision-id']).toMatch(/^[0-9a-f-]{36}$/);
    // One error annotation, carrying the reason.
    expect(run.stdout.match(/^::error/gm)).toHaveLength(1);
    expect(run.stdout).toMatch(/^::error::Revision [0-9a-f-]{36} ended with DEPLOY_FAILED: Deploy failed: the sandbox was asked to fail this stage/m);
    expect(run.stdout).toMatch(/::group::Last \d+ deploy log lines of revision/);
    expect(run.stdout).toContain('sandbox: deploy failed on purpose');
    expect(run.summary).toContain('Deploy failed: the sandbox was asked to fail this stage');
  });

  it('does not fail when the server answers 503 twice and then recovers', async () => {
    const proxy = await startFlakyProxy(server.url, 2);
    try {
      const run = await runAction({ ...base(), 'api-url': proxy.url, name: uniqueName('flaky'), 'image-uri': 'registry.example.com/acme/agent:1' });
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.outputs.status).toBe('DEPLOYED');
      expect(run.stdout).toContain('HTTP 503; retry 1');
      expect(run.stdout).toContain('HTTP 503; retry 2');
      expect(proxy.requests.length).toBeGreaterThan(3);
    } finally {
      await proxy.close();
    }
  });

  it('falls back to polling every poll-interval when something on the way does not hold requests', async () => {
    const proxy = await startFlakyProxy(server.url, 0, { stripPrefer: true });
    try {
      const run = await runAction({
        ...base(),
        'api-url': proxy.url,
        name: uniqueName('nohold'),
        'image-uri': 'registry.example.com/acme/agent:1',
        'poll-interval': '100ms',
      });
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.outputs.status).toBe('DEPLOYED');
      // How many requests it took depends on timing; test/action/wait.test.ts pins the fallback down.
      expect(proxy.requests.some((r) => r.includes('/revisions/'))).toBe(true);
    } finally {
      await proxy.close();
    }
  });

  it('rejects conflicting or missing inputs before any request, naming the input', async () => {
    const proxy = await startFlakyProxy(server.url, 0);
    try {
      const cases: Array<[Record<string, string>, RegExp]> = [
        [{ name: 'a-b', 'deployment-id': crypto.randomUUID(), 'image-uri': 'x' }, /deployment-id and name are both set/],
        [{ 'image-uri': 'x' }, /Input name or deployment-id is required/],
        [{ name: 'a-b' }, /Input source is required with name/],
        [{ name: 'a-b', source: 'external_docker' }, /Input image-uri is required/],
        [{ name: 'a-b', 'image-uri': 'x', 'repo-url': 'https://github.com/a/b' }, /repo-url \(source github\) and image-uri \(source external_docker\)/],
        [{ name: 'a-b', 'image-uri': 'x', 'wait-timeout': 'soon' }, /Input wait-timeout must be a duration/],
        [{ name: 'a-b', 'image-uri': 'x', 'resource-spec': 'min_scale: 3\nmax_scale: 1' }, /Input resource-spec \(max_scale\)/],
        [{ name: 'a-b', 'image-uri': 'x', secrets: 'NOPE' }, /Input secrets, line 1: expected NAME=value/],
      ];
      for (const [inputs, message] of cases) {
        const run = await runAction({ 'api-url': proxy.url, 'api-key': server.apiKey, ...inputs });
        expect(run.code, JSON.stringify(inputs)).toBe(1);
        expect(run.stdout).toMatch(message);
      }
      expect(proxy.requests).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  it('reports to GitHub Deployments through a stand-in of its API, and only warns when GitHub refuses', async () => {
    const calls: Array<{ method: string; url: string; body: any; auth: string | undefined }> = [];
    let refuse = false;
    const github: Server = createServer(async (req, res) => {
      const body = (await readBody(req)) as { environment?: string; state?: string };
      calls.push({ method: req.method!, url: req.url!, body, auth: req.headers.authorization });
      if (refuse) return res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'Resource not accessible by integration' }));
      if (req.url === '/repos/acme/agent/deployments')
        return res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: 77, environment: body.environment }));
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ id: calls.length, state: body.state }));
    });
    await new Promise<void>((r) => github.listen(0, '127.0.0.1', r));
    const githubUrl = `http://127.0.0.1:${(github.address() as AddressInfo).port}`;
    try {
      const name = uniqueName('ghd');
      const ok = await runAction(
        { ...base(), name, 'image-uri': 'x:1', 'custom-url': 'https://agent.example.com', 'github-deployment': 'true', 'github-token': 'ghs_test_token' },
        { GITHUB_API_URL: githubUrl },
      );
      expect(ok.code, ok.stdout + ok.stderr).toBe(0);
      expect(calls.map((c) => `${c.method} ${c.url}`)).toEqual([
        'POST /repos/acme/agent/deployments',
        'POST /repos/acme/agent/deployments/77/statuses',
        'POST /repos/acme/agent/deployments/77/statuses',
      ]);
      expect(calls[0]!.body).toMatchObject({ ref: '0123456789abcdef0123456789abcdef01234567', environment: name });
      expect(calls[0]!.auth).toBe('token ghs_test_token');
      expect(calls[1]!.body).toMatchObject({ state: 'in_progress', log_url: 'https://github.com/acme/agent/actions/runs/4242' });
      expect(calls[2]!.body).toMatchObject({ state: 'success', environment_url: 'https://agent.example.com' });
      expect(ok.outputs.url).toBe('https://agent.example.com');

      refuse = true;
      calls.length = 0;
      const refused = await runAction(
        { ...base(), name, 'image-uri': 'x:2', 'github-deployment': 'true', 'github-token': 'ghs_test_token' },
        { GITHUB_API_URL: githubUrl },
      );
      expect(refused.code, refused.stdout + refused.stderr).toBe(0);
      expect(refused.outputs.status).toBe('DEPLOYED');
      expect(refused.stdout).toMatch(/::warning::Could not create a GitHub deployment \(GitHub answered 403\)/);
      expect(calls).toHaveLength(1);
    } finally {
      github.closeAllConnections();
      await new Promise((r) => github.close(r));
    }
  });
});
