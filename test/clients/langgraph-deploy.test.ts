import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { uniqueName } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { agentProject, gzipTarball } from '../helpers/tarball.ts';

/**
 * Replays what `langgraph deploy` (langgraph-cli deploy.py / host_backend.py) sends, as
 * ../shared/reference/real-clients.md lists it, against the real server in a child process. Like
 * the CLI's httpx client, every non-2xx answer is an error, and only the keys it reads are read.
 * Polling intervals are shortened (the CLI waits 1-3 s between polls); nothing else is changed.
 */
function hostBackend(baseUrl: string, apiKey: string) {
  const calls: string[] = [];
  async function request(method: string, path: string, body?: unknown): Promise<any> {
    calls.push(`${method} ${path.split('?')[0]}`);
    const response = await fetch(baseUrl + path, {
      method,
      headers: { 'X-Api-Key': apiKey, Accept: 'application/json', ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    // httpx's raise_for_status(): any non-2xx is an error; an empty body is fine.
    if (response.status < 200 || response.status >= 300) throw new Error(`${method} ${path} → HTTP ${response.status}: ${text}`);
    return text ? JSON.parse(text) : null;
  }
  return { request, calls };
}

const TERMINAL = ['DEPLOYED', 'CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'SKIPPED'];

/** The CLI's wait loop: newest revision via `?limit=1`, then poll it; build logs while it builds. */
async function waitForRevision(api: ReturnType<typeof hostBackend>, deploymentId: string, withBuildLogs: boolean) {
  const latest = await api.request('GET', `/v2/deployments/${deploymentId}/revisions?limit=1`);
  const revisionId: string = latest.resources[0].id;
  const buildLogs: string[] = [];
  const seen: string[] = [];
  const deadline = Date.now() + 30_000;
  for (;;) {
    const revision = await api.request('GET', `/v2/deployments/${deploymentId}/revisions/${revisionId}`);
    if (seen.at(-1) !== revision.status) seen.push(revision.status);
    if (withBuildLogs && (revision.status === 'AWAITING_BUILD' || revision.status === 'BUILDING')) {
      const logs = await api.request('POST', `/v1/projects/${deploymentId}/revisions/${revisionId}/build_logs`, {
        limit: 100,
        order: 'desc',
        offset: null,
        level: null,
        query: null,
        start_time: null,
        end_time: null,
      });
      for (const line of logs.logs) buildLogs.push(line.message);
    }
    if (TERMINAL.includes(revision.status)) return { revision, buildLogs, seen };
    if (Date.now() > deadline) throw new Error(`revision ${revisionId} still ${revision.status}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('langgraph deploy against this server', () => {
  let server: ServerProcess;
  let bare: ServerProcess;
  const pushSecret = `push-token-${crypto.randomUUID()}`;
  beforeAll(async () => {
    [server, bare] = await Promise.all([
      startServerProcess({ SANDBOX_STAGE_MS: '150', REGISTRY_URL: 'registry.example.test/acme', REGISTRY_PUSH_TOKEN: pushSecret }),
      startServerProcess({ SANDBOX_STAGE_MS: '20' }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([server?.kill(), bare?.kill()]);
  });

  it('--remote: find → create (internal_source) → upload-url → PUT → PATCH → revisions?limit=1 → poll to DEPLOYED with build logs → custom_url → list, revisions, logs → delete', async () => {
    const api = hostBackend(server.url, server.apiKey);
    const name = `my_agent_${uniqueName().replaceAll('-', '_')}`;
    const secrets = [{ name: 'OPENAI_API_KEY', value: 'sk-from-dotenv' }];
    const tracked_packages = [{ name: 'langgraph', version: '1.0.0' }];
    const signatures: string[] = [];

    async function deployRemote(tarball: Buffer): Promise<{ deploymentId: string; created: boolean; wait: Awaited<ReturnType<typeof waitForRevision>> }> {
      const found = await api.request('GET', `/v2/deployments?name_contains=${encodeURIComponent(name)}`);
      let deploymentId: string | undefined = found.resources.find((d: { name: string }) => d.name === name)?.id;
      const created = !deploymentId;
      if (!deploymentId) {
        const deployment = await api.request('POST', '/v2/deployments', {
          name,
          source: 'internal_source',
          source_config: { deployment_type: 'dev' },
          source_revision_config: { langgraph_config_path: 'langgraph.json' },
          secrets,
        });
        deploymentId = deployment.id as string;
      }
      const { upload_url, object_path } = await api.request('POST', `/v2/deployments/${deploymentId}/upload-url`);
      expect(new URL(upload_url).origin).toBe(`http://localhost:${server.port}`); // PUBLIC_URL's default
      signatures.push(new URL(upload_url).searchParams.get('signature')!);
      // The upload: no API key, the headers the CLI sends to a GCS-style signed URL.
      const put = await fetch(upload_url, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/gzip', 'Content-Length': String(tarball.length), 'X-Goog-Content-Length-Range': '0,209715200' },
        body: tarball,
      });
      expect(put.status, await put.clone().text()).toBeGreaterThanOrEqual(200);
      expect(put.status).toBeLessThan(300);
      await api.request('PATCH', `/v2/deployments/${deploymentId}`, {
        revision_source: 'internal_source',
        source_revision_config: { source_tarball_path: object_path, langgraph_config_path: 'langgraph.json' },
        source_config: { install_command: 'pip install -e .', build_command: null },
        secrets,
        tracked_packages,
      });
      return { deploymentId, created, wait: await waitForRevision(api, deploymentId, true) };
    }

    const first = await deployRemote(await gzipTarball(agentProject()));
    expect(first.created).toBe(true);
    expect(first.wait.revision.status).toBe('DEPLOYED');
    expect(first.wait.seen).toContain('BUILDING');
    expect(first.wait.buildLogs.some((line) => line.includes('simulated build of the uploaded tarball'))).toBe(true);
    const id = first.deploymentId;

    const deployment = await api.request('GET', `/v2/deployments/${id}`);
    expect(deployment.source_config.custom_url).toMatch(/^https:\/\/my-agent-[a-z0-9-]+\.sandbox\.localhost$/);
    expect(deployment.tenant_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(deployment.active_revision_id).toBe(first.wait.revision.id);

    // A second deploy of the same name: found, not created; the newest revision is the new one.
    const second = await deployRemote(
      await gzipTarball({ ...agentProject({ agent: './agent.py:graph', helper: './helper.py:g' }), 'helper.py': 'g = None\n' }),
    );
    expect(second.created).toBe(false);
    expect(second.deploymentId).toBe(id);
    expect(second.wait.revision.id).not.toBe(first.wait.revision.id);
    expect(second.wait.revision.status).toBe('DEPLOYED');

    // deploy list, deploy revisions list ID --limit 5, deploy logs (build of a revision, then the live deploy logs).
    const list = await api.request('GET', '/v2/deployments');
    expect(list.resources.map((d: { id: string }) => d.id)).toContain(id);
    const revisions = await api.request('GET', `/v2/deployments/${id}/revisions?limit=5`);
    expect(revisions.resources.map((r: { id: string }) => r.id)).toEqual([second.wait.revision.id, first.wait.revision.id]);
    const buildLogs = await api.request('POST', `/v1/projects/${id}/revisions/${second.wait.revision.id}/build_logs`, {
      limit: 50,
      order: 'desc',
      offset: null,
      level: null,
      query: null,
      start_time: null,
      end_time: null,
    });
    expect(buildLogs.logs.map((l: { message: string }) => l.message).join('\n')).toContain('graph config langgraph.json found (graphs: agent, helper)');
    for (const line of buildLogs.logs) expect(Object.keys(line).sort()).toEqual(['id', 'level', 'message', 'timestamp']);
    const deployLogs = await api.request('POST', `/v1/projects/${id}/deploy_logs`, {
      limit: 50,
      order: 'desc',
      offset: null,
      level: null,
      query: null,
      start_time: null,
      end_time: null,
    });
    expect(deployLogs.logs.length).toBeGreaterThan(0);
    expect(deployLogs).toHaveProperty('next_offset');

    await api.request('DELETE', `/v2/deployments/${id}`);
    await eventually(async () =>
      (await fetch(`${server.url}/v2/deployments/${id}`, { headers: { 'X-Api-Key': server.apiKey } })).status === 404 ? true : undefined,
    );
    expect(api.calls.filter((call) => call.startsWith('POST /v1/projects/'))).not.toHaveLength(0);

    // `deploy --remote --name <the same>` after the delete: "No deployment found. Will create." → 201,
    // and its tracing project is the one the deleted deployment left behind.
    const [leftBehind] = (await api.request('GET', `/v1/tracing-projects?name=${name}`)).resources;
    expect(leftBehind.deployment_id).toBeNull();
    const again = await deployRemote(await gzipTarball(agentProject()));
    expect(again.created).toBe(true);
    expect(again.deploymentId).not.toBe(id);
    expect(again.wait.revision.status).toBe('DEPLOYED');
    expect((await api.request('GET', `/v1/tracing-projects?name=${name}`)).resources).toEqual([
      expect.objectContaining({ id: leftBehind.id, deployment_id: again.deploymentId }),
    ]);

    // The signed URLs authorize an upload: they are never written to the log.
    expect(signatures).toHaveLength(3);
    for (const signature of signatures) expect(server.output()).not.toContain(signature);
  });

  it('--image: create (internal_docker) → push-token → (docker push, simulated) → PATCH image_uri → DEPLOYED; the token is never logged', async () => {
    const api = hostBackend(server.url, server.apiKey);
    const name = uniqueName('image');
    const deployment = await api.request('POST', '/v2/deployments', {
      name,
      source: 'internal_docker',
      source_config: { deployment_type: 'prod' },
      source_revision_config: {},
      secrets: [],
    });
    expect(deployment.latest_revision_id).toBeNull();
    const { token, registry_url } = await api.request('POST', `/v2/deployments/${deployment.id}/push-token`);
    expect(token).toBe(pushSecret);
    expect(registry_url).toBe('registry.example.test/acme');
    // SIMULATED: `docker login -p <token> <registry_url>` and `docker push` happen outside this server; the digest is made up here.
    const imageUri = `${registry_url}/${name}@sha256:${'ab'.repeat(32)}`;
    await api.request('PATCH', `/v2/deployments/${deployment.id}`, {
      revision_source: 'internal_docker',
      source_revision_config: { image_uri: imageUri },
      secrets: [],
      tracked_packages: [{ name: 'langgraph' }],
    });
    const { revision, seen } = await waitForRevision(api, deployment.id, false);
    expect(revision.status).toBe('DEPLOYED');
    expect(seen).not.toContain('BUILDING');
    expect(revision.source_revision_config.image_uri).toBe(imageUri);
    const read = await api.request('GET', `/v2/deployments/${deployment.id}`);
    expect(read.source_config.custom_url).toMatch(/^https:\/\//);
    expect(server.output()).not.toContain(pushSecret);
  });

  it('--image against a server without a registry: push-token is a 400 that names the missing settings', async () => {
    const api = hostBackend(bare.url, bare.apiKey);
    const deployment = await api.request('POST', '/v2/deployments', {
      name: uniqueName('image'),
      source: 'internal_docker',
      source_config: { deployment_type: 'dev' },
      source_revision_config: {},
      secrets: [],
    });
    const response = await fetch(`${bare.url}/v2/deployments/${deployment.id}/push-token`, {
      method: 'POST',
      headers: { 'X-Api-Key': bare.apiKey, Accept: 'application/json' },
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { detail: string }).detail).toMatch(/REGISTRY_URL and REGISTRY_PUSH_TOKEN/);
  });
});
