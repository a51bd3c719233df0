import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { withInstallSlot } from '../helpers/install-slots.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, pushPayload, revisionsOf } from '../webhooks/github.ts';
import { type AgentProcess, graphRepo, hostFetch, killLeftoverServers, localListener, runGraph, SETTLED, startAgent } from './harness.ts';

const SECRET = 'e2e-webhook-secret';

/**
 * The whole real path on loopback: the server and a `local` agent as processes, a real git
 * repository over file://, `npm ci` from the npm registry (npm's cache), the LangGraph JS agent
 * server (`langgraphjs dev`) and the agent's reverse proxy. Nothing is simulated.
 */
describe('the local agent, end to end', () => {
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-work-'));

  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  it('builds a github deployment, serves it at its URL, swaps on a signed push with no failed request, and keeps serving when an install fails', {
    timeout: 600_000,
  }, async () => {
    server = await startServerProcess({ ALLOW_FILE_REPO_URLS: 'true', GITHUB_WEBHOOK_SECRET: SECRET, RECONCILE_INTERVAL_MS: '0', AGENT_LEASE_MS: '10000' });
    const api = apiClient(server.url, server.apiKey);
    const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
    const { integrationId, installationId } = await workspaceFixtures(api);
    const { listenerId, token } = await localListener(api, workspaceId);
    agent = await startAgent({ url: server.url, token, listenerId, workDir });
    const repo = graphRepo();

    const started = Date.now();
    // Its npm ci downloads from the registry: one of the machine's install slots while it builds.
    const { created, first } = await withInstallSlot(async () => {
      const created = await api.post(
        '/v2/deployments',
        githubBody(uniqueName('e2e'), integrationId, {
          source_config: { integration_id: integrationId, repo_url: repo.url, deployment_type: 'dev', build_on_push: true },
          source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
          secrets: [{ name: 'GREETING', value: 'hello-from-a-secret' }],
        }),
      );
      expect(created.status).toBe(201);
      return { created, first: await revisionReaches(api, created.body.id, created.body.latest_revision_id, SETTLED, 300_000) };
    });
    const deploymentId = created.body.id as string;
    const deployedMs = Date.now() - started;
    const buildLog = (await api.get(`/v2/deployments/${deploymentId}/revisions/${first.id}/logs?type=build&limit=1000`)).body.logs as Array<{
      timestamp: string;
      message: string;
    }>;
    const deployLog = (await api.get(`/v2/deployments/${deploymentId}/revisions/${first.id}/logs?type=deploy&limit=1000`)).body.logs as Array<{
      timestamp: string;
      message: string;
    }>;
    expect(first.status, `${first.status_message}\n${buildLog.map((l) => l.message).join('\n')}\n${agent.output()}`).toBe('DEPLOYED');
    expect(first.source_revision_config.repo_commit_sha).toBe(repo.first);
    expect(buildLog.some((l) => l.message === '$ npm ci')).toBe(true);

    // The deployment's URL, through the agent's proxy: its custom_url (the path form), and <name>.localhost.
    const deployment = (await api.get(`/v2/deployments/${deploymentId}`)).body;
    expect(deployment.status).toBe('READY');
    const host = deployment.source_config.custom_url;
    expect((await hostFetch(agent.proxyPort, host, '/ok')).status).toBe(200);
    const firstAnswerAt = Date.now();
    const answer = await runGraph(agent.proxyPort, host);
    const firstAnswerMs = Date.now() - firstAnswerAt;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ answer: 'the first answer', secret_seen: 'hello-from-a-secret' });
    expect((await runGraph(agent.proxyPort, `${deployment.name}.localhost`)).body.answer).toBe('the first answer');

    const at = (log: typeof buildLog, test: (m: string) => boolean) => Date.parse(log.find((l) => test(l.message))?.timestamp ?? '');
    const timings = {
      fetch_ms: at(buildLog, (m) => m === '$ npm ci') - Date.parse(buildLog[0]!.timestamp),
      install_ms: at(buildLog, (m) => m.startsWith('build finished')) - at(buildLog, (m) => m === '$ npm ci'),
      start_ms: at(deployLog, (m) => m.startsWith('serving ')) - Date.parse(deployLog[0]!.timestamp),
      create_to_deployed_ms: deployedMs,
      first_answer_ms: firstAnswerMs,
    };
    console.log(`local agent e2e timings: ${JSON.stringify(timings)}`);

    // A client calls the URL in a loop while a signed push builds and swaps to a new commit.
    const failures: unknown[] = [];
    const answers = new Set<string>();
    let calls = 0;
    let looping = true;
    const loop = (async () => {
      while (looping) {
        const response = await runGraph(agent!.proxyPort, host).catch((error: unknown) => ({ status: 0, body: String(error) }));
        calls += 1;
        if (response.status !== 200) failures.push(response);
        else answers.add(response.body.answer);
      }
    })();
    const second = repo.commit({ 'src/graph.mjs': repo.read('src/graph.mjs').replace('the first answer', 'the second answer') }, 'Answer differently');
    const htmlUrl = repo.url.replace(/\.git$/, '');
    const push = await deliver(server.url, 'push', pushPayload({ repo: 'acme/agent', after: second, htmlUrl, installationId }), { secret: SECRET });
    expect(push.status).toBe(202);
    const pushed = await eventually(
      async () => (await revisionsOf(api, deploymentId)).find((r) => r.source_revision_config.repo_commit_sha === second),
      30_000,
    );
    const swapped = await revisionReaches(api, deploymentId, pushed.id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(swapped.status, swapped.status_message).toBe('DEPLOYED');
    await eventually(async () => (answers.has('the second answer') ? true : undefined), 10_000);
    looping = false;
    await loop;
    expect(failures).toEqual([]);
    expect(answers).toEqual(new Set(['the first answer', 'the second answer']));
    // The push reuses the installed packages (lock file unchanged): the swap takes seconds, not a whole npm ci.
    expect(calls).toBeGreaterThan(2);
    console.log(`local agent e2e swap: ${calls} calls during the push build and swap, ${failures.length} failed`);

    // A commit whose install fails: BUILD_FAILED with npm's own words, and the live revision keeps answering.
    const manifest = JSON.parse(repo.read('package.json')) as { dependencies: Record<string, string> };
    manifest.dependencies['left-pad'] = '1.3.0';
    const broken = repo.commit({ 'package.json': JSON.stringify(manifest, null, 2) }, 'Add a dependency without updating the lock file');
    expect((await deliver(server.url, 'push', pushPayload({ repo: 'acme/agent', after: broken, htmlUrl, installationId }), { secret: SECRET })).status).toBe(
      202,
    );
    const brokenRevision = await eventually(
      async () => (await revisionsOf(api, deploymentId)).find((r) => r.source_revision_config.repo_commit_sha === broken),
      30_000,
    );
    const failed = await revisionReaches(api, deploymentId, brokenRevision.id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(failed.status).toBe('BUILD_FAILED');
    expect(failed.status_message).toMatch(/install_command `npm ci` failed with exit code [1-9]/);
    const failedLog = (await api.get(`/v2/deployments/${deploymentId}/revisions/${failed.id}/logs?type=build&limit=1000`)).body.logs as Array<{
      message: string;
    }>;
    // npm's own words (its error lines), not a summary of ours.
    expect(
      failedLog.some((l) => /^npm (error|ERR!) /.test(l.message)),
      failedLog.map((l) => l.message).join('\n'),
    ).toBe(true);
    expect((await runGraph(agent.proxyPort, host)).body.answer).toBe('the second answer');
    const after = (await api.get(`/v2/deployments/${deploymentId}`)).body;
    expect(after.active_revision_id).toBe(swapped.id);
  });
});
