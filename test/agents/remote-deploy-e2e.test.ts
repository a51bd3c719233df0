import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { uniqueName } from '../helpers/fixtures.ts';
import { withInstallSlot } from '../helpers/install-slots.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { gzipTarball } from '../helpers/tarball.ts';
import { type AgentProcess, FIXTURE, hostFetch, killLeftoverServers, localListener, runGraph, serverPidOf, startAgent } from './harness.ts';

/** The files of the fixture LangGraph app (the one local-e2e builds from git), as `langgraph deploy` packs its directory. */
function fixtureFiles(dir = FIXTURE, files: Record<string, Buffer> = {}): Record<string, Buffer> {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) fixtureFiles(path, files);
    else files[relative(FIXTURE, path)] = readFileSync(path);
  }
  return files;
}

/**
 * `langgraph deploy --remote` as langgraph-cli's host_backend.py sends it (real-clients.md): every
 * non-2xx is an error, only the keys it reads are read, `X-Api-Key` and `Accept: application/json`.
 */
function hostBackend(baseUrl: string, apiKey: string) {
  return async function request(method: string, path: string, body?: unknown): Promise<any> {
    const response = await fetch(baseUrl + path, {
      method,
      headers: { 'X-Api-Key': apiKey, Accept: 'application/json', ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status < 200 || response.status >= 300) throw new Error(`${method} ${path} → HTTP ${response.status}: ${text}`);
    return text ? JSON.parse(text) : null;
  };
}

const TERMINAL = ['DEPLOYED', 'CREATE_FAILED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'SKIPPED'];

/**
 * The remote path for real: the server and a `local` agent as processes on loopback; the tarball
 * uploaded through the signed URL, fetched by the agent through its claim's signed URL, unpacked,
 * `npm ci` from the npm registry (npm's cache), the LangGraph JS agent server, the agent's proxy.
 * Nothing is simulated; the CLI's poll intervals are shortened, nothing else is changed.
 */
describe('langgraph deploy --remote, built and run by the local agent', () => {
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  const workDir = mkdtempSync(join(tmpdir(), 'cp-remote-work-'));

  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  it('create → upload-url → PUT → PATCH → revisions?limit=1 → poll to DEPLOYED with build logs → custom_url answers a run → delete stops the server and removes its directory', {
    timeout: 900_000,
  }, async () => {
    server = await startServerProcess({ RECONCILE_INTERVAL_MS: '0', AGENT_LEASE_MS: '10000' });
    const admin = apiClient(server.url, server.apiKey);
    const workspaceId = (await admin.get('/v1/workspaces')).body[0].id as string;
    const { listenerId, token } = await localListener(admin, workspaceId);
    agent = await startAgent({ url: server.url, token, listenerId, workDir });
    const request = hostBackend(server.url, server.apiKey);
    const secrets = [{ name: 'GREETING', value: 'hello-from-dotenv' }];

    /** The CLI's whole --remote sequence for one tarball; answers the deployment id, the final revision and the build log lines it saw. */
    async function deployRemote(name: string, tarball: Buffer) {
      const found = await request('GET', `/v2/deployments?name_contains=${encodeURIComponent(name)}`);
      let id: string | undefined = found.resources.find((d: { name: string }) => d.name === name)?.id;
      if (!id) {
        const created = await request('POST', '/v2/deployments', {
          name,
          source: 'internal_source',
          source_config: { deployment_type: 'dev' },
          source_revision_config: { langgraph_config_path: 'langgraph.json' },
          secrets,
        });
        id = created.id as string;
      }
      const { upload_url, object_path } = await request('POST', `/v2/deployments/${id}/upload-url`);
      const putAt = Date.now();
      const put = await fetch(upload_url, {
        method: 'PUT',
        headers: { 'Content-Type': 'application/gzip', 'Content-Length': String(tarball.length), 'X-Goog-Content-Length-Range': '0,209715200' },
        body: tarball,
      });
      expect(put.status, await put.clone().text()).toBe(200);
      const uploadMs = Date.now() - putAt;
      await request('PATCH', `/v2/deployments/${id}`, {
        revision_source: 'internal_source',
        source_revision_config: { source_tarball_path: object_path, langgraph_config_path: 'langgraph.json' },
        secrets,
        tracked_packages: [{ name: '@langchain/langgraph', version: '1.7.3' }],
      });
      const latest = await request('GET', `/v2/deployments/${id}/revisions?limit=1`);
      const revisionId = latest.resources[0].id as string;
      const buildLogs = new Set<string>();
      // When the poll first saw each status, from the PATCH's answer (the stage timings reported).
      const seenAt: Record<string, number> = {};
      const patchedAt = Date.now();
      const deadline = Date.now() + 600_000;
      for (;;) {
        const revision = await request('GET', `/v2/deployments/${id}/revisions/${revisionId}`);
        seenAt[revision.status] ??= Date.now() - patchedAt;
        if (revision.status === 'AWAITING_BUILD' || revision.status === 'BUILDING') {
          const logs = await request('POST', `/v1/projects/${id}/revisions/${revisionId}/build_logs`, {
            limit: 100,
            order: 'desc',
            offset: null,
            level: null,
            query: null,
            start_time: null,
            end_time: null,
          });
          for (const line of logs.logs) buildLogs.add(line.message as string);
        }
        if (TERMINAL.includes(revision.status)) return { id, revision, buildLogs: [...buildLogs], uploadMs, seenAt };
        if (Date.now() > deadline) throw new Error(`revision ${revisionId} still ${revision.status}\n${agent!.output()}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }

    // A hostile tarball: the agent refuses it before writing anything, and the revision says which entry.
    const evil = await deployRemote(uniqueName('evil'), await gzipTarball({ 'langgraph.json': '{"graphs":{}}', '../evil': 'pwned' }));
    expect(evil.revision.status).toBe('BUILD_FAILED');
    expect(evil.revision.status_message).toContain('"../evil"');
    expect(existsSync(join(workDir, 'evil'))).toBe(false);
    expect(existsSync(join(workDir, evil.id, 'evil'))).toBe(false);

    // The fixture app, as the CLI packs it.
    const tarball = await gzipTarball(fixtureFiles());
    const started = Date.now();
    // Its npm ci downloads from the registry: one of the machine's install slots while it builds.
    const { id, revision, buildLogs, uploadMs, seenAt } = await withInstallSlot(() => deployRemote(uniqueName('remote'), tarball));
    const fullBuildLog = (await admin.get(`/v2/deployments/${id}/revisions/${revision.id}/logs?type=build&limit=1000`)).body.logs as Array<{
      timestamp: string;
      message: string;
    }>;
    expect(revision.status, `${revision.status_message}\n${fullBuildLog.map((l) => l.message).join('\n')}\n${agent.output()}`).toBe('DEPLOYED');
    // Tarballs carry no commit.
    expect(revision.source_revision_config.repo_commit_sha).toBeNull();
    expect(revision.source_revision_config.source_tarball_path).toMatch(/\.tar\.gz$/);
    // The CLI saw the build as it went: the agent's own lines, unpacking and npm's install.
    expect(buildLogs.some((line) => line.startsWith('unpacked the uploaded tarball:'))).toBe(true);
    expect(fullBuildLog.some((l) => l.message === '$ npm ci')).toBe(true);
    expect(fullBuildLog.some((l) => l.message === 'build finished (uploaded tarball)')).toBe(true);
    // The signed URLs (the upload's and the claim's fetch URL) are never written to a log.
    const everything = `${server.output()}\n${agent.output()}\n${fullBuildLog.map((l) => l.message).join('\n')}`;
    expect(everything).not.toMatch(/signature=/);

    // The CLI's result: custom_url. A request to it through the agent's proxy reaches the running agent server.
    const deployment = await request('GET', `/v2/deployments/${id}`);
    const host = deployment.source_config.custom_url as string;
    expect((await hostFetch(agent.proxyPort, host, '/ok')).status).toBe(200);
    const askedAt = Date.now();
    const answer = await runGraph(agent.proxyPort, host);
    const firstAnswerMs = Date.now() - askedAt;
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body).toMatchObject({ answer: 'the first answer', secret_seen: 'hello-from-dotenv' });

    // Stage times as the client sees them (polled every 200 ms, so each is ±0.2 s).
    const timings = {
      tarball_bytes: tarball.length,
      upload_ms: uploadMs,
      patch_to_building_ms: seenAt.BUILDING,
      build_ms: (seenAt.AWAITING_DEPLOY ?? seenAt.DEPLOYING!) - seenAt.BUILDING!,
      start_ms: seenAt.DEPLOYED! - seenAt.DEPLOYING!,
      patch_to_deployed_ms: seenAt.DEPLOYED,
      first_answer_ms: firstAnswerMs,
      upload_to_first_answer_ms: Date.now() - started,
    };
    console.log(`remote deploy e2e timings: ${JSON.stringify(timings)}`);

    // `langgraph deploy delete`: the agent server stops and its work directory goes.
    const buildDir = join(workDir, id, revision.id);
    const pid = serverPidOf(buildDir);
    expect(isAlive(pid)).toBe(true);
    const deletedAt = Date.now();
    await request('DELETE', `/v2/deployments/${id}`);
    await eventually(
      async () => ((await fetch(`${server!.url}/v2/deployments/${id}`, { headers: { 'X-Api-Key': server!.apiKey } })).status === 404 ? true : undefined),
      60_000,
    );
    console.log(`remote deploy e2e: DELETE to 404 in ${Date.now() - deletedAt} ms`);
    // One teardown, done under its first claim: none went back to the queue after a lapsed lease.
    expect(
      agent
        .output()
        .split('\n')
        .filter((line) => line === `agent: tore down ${deployment.name}`),
    ).toHaveLength(1);
    await eventually(async () => (!isAlive(pid) ? true : undefined), 20_000);
    expect(existsSync(join(workDir, id))).toBe(false);
    expect((await hostFetch(agent.proxyPort, host, '/ok')).status).not.toBe(200);
  });
});

/** Whether a process (group leader) still exists. */
function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
