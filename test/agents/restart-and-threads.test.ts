import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { withInstallSlot } from '../helpers/install-slots.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { type AgentProcess, graphRepo, hostFetch, killLeftoverServers, localScene, processesIn, SETTLED, startAgent } from './harness.ts';

/** A graph whose state counts the runs of a thread: a thread continued on another revision or server counts on. */
const counting = (answer: string) => `import { Annotation, END, START, StateGraph } from '@langchain/langgraph';

const State = Annotation.Root({
  count: Annotation({ reducer: (a, b) => a + b, default: () => 0 }),
  answer: Annotation(),
});

export const graph = new StateGraph(State)
  .addNode('respond', () => ({ count: 1, answer: ${JSON.stringify(answer)} }))
  .addEdge(START, 'respond')
  .addEdge('respond', END)
  .compile();
`;

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

/**
 * Restarts of the real agent under load, a `kill -9` in the middle of `npm ci`, and a thread
 * that lives across revisions and restarts: the real server, agents, bwrap, npm and LangGraph.js.
 */
describe('restarts of the local agent, and threads that survive them', () => {
  let server: ServerProcess | undefined;
  const agents: AgentProcess[] = [];
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-restart-'));

  afterAll(async () => {
    for (const agent of agents) await agent.stop('SIGINT');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  it('SIGTERM + restart under 20 requests/s fails none; a thread created on revision 1 is read and continued after the restart, on revision 2, and after a kill -9 mid-install leaves no process of that build', {
    timeout: 600_000,
  }, async () => {
    const scene = await localScene({ AGENT_LEASE_MS: '4000' });
    server = scene.server;
    const { api, integrationId, listenerId, token } = scene;
    const proxyPort = await freePort();
    const start = () => startAgent({ url: server!.url, token, listenerId, workDir, proxyPort }).then((a) => (agents.push(a), a));
    const first = await start();
    const repo = graphRepo();
    repo.commit({ 'src/graph.mjs': counting('revision one') }, 'A counting graph');
    // Its npm ci downloads from the registry: one of the machine's install slots while it builds.
    const { created, one } = await withInstallSlot(async () => {
      const created = await api.post(
        '/v2/deployments',
        githubBody(uniqueName('threads'), integrationId, {
          source_config: { integration_id: integrationId, repo_url: repo.url, deployment_type: 'dev', build_on_push: false },
        }),
      );
      expect(created.status).toBe(201);
      return { created, one: await revisionReaches(api, created.body.id, created.body.latest_revision_id, SETTLED, 300_000) };
    });
    const id = created.body.id as string;
    expect(one.status, one.status_message).toBe('DEPLOYED');
    const host = (await api.get(`/v2/deployments/${id}`)).body.source_config.custom_url;
    const call = (method: string, path: string, body?: unknown) =>
      hostFetch(proxyPort, host, path, {
        method,
        headers: { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const thread = (await call('POST', '/threads', {})).body.thread_id as string;
    expect(thread).toMatch(/^[0-9a-f-]{36}$/);
    const runOnThread = async () =>
      (await call('POST', `/threads/${thread}/runs/wait`, { assistant_id: 'agent', input: {} })).body as { count: number; answer: string };
    expect(await runOnThread()).toMatchObject({ count: 1, answer: 'revision one' });

    // 20 requests a second through the proxy while the agent is stopped with SIGTERM and a new one started.
    const failures: unknown[] = [];
    let sent = 0;
    let loading = true;
    const load = (async () => {
      const pending: Promise<void>[] = [];
      while (loading) {
        sent += 1;
        pending.push(
          call('POST', '/runs/wait', { assistant_id: 'agent', input: {} }).then(
            (r) => void (r.status === 200 ? undefined : failures.push({ status: r.status, body: r.body })),
            (error: unknown) => void failures.push(String(error)),
          ),
        );
        await new Promise((r) => setTimeout(r, 50));
      }
      await Promise.all(pending);
    })();
    await new Promise((r) => setTimeout(r, 1000));
    // A service manager's restart: stop, then start (nothing overlaps).
    await first.stop('SIGTERM');
    const second = await start();
    await new Promise((r) => setTimeout(r, 2000));
    loading = false;
    await load;
    console.log(`restart under load: ${sent} requests, ${failures.length} failed`);
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(40);
    expect(second.output()).toMatch(/took over the agent server \(pid \d+\)/);
    expect((await api.get(`/v2/deployments/${id}`)).body.status).toBe('READY');

    // The thread, after the restart: read and continued.
    expect((await call('GET', `/threads/${thread}/state`)).body.values).toMatchObject({ count: 1 });
    expect(await runOnThread()).toMatchObject({ count: 2, answer: 'revision one' });

    // Revision 2: the same thread, read and continued by the new revision's server.
    await new Promise((r) => setTimeout(r, 3500)); // the server writes its state at most 3 s after a change
    repo.commit({ 'src/graph.mjs': counting('revision two') }, 'Revision two');
    const next = await api.post(`/v2/deployments/${id}/revisions`, {});
    const two = await revisionReaches(api, id, next.body.id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(two.status, two.status_message).toBe('DEPLOYED');
    // The lock file did not change: the packages installed for revision 1 are reused, npm ci does not run.
    const twoLog = (await api.get(`/v2/deployments/${id}/revisions/${two.id}/logs?type=build&limit=1000`)).body.logs as Array<{ message: string }>;
    expect(twoLog.some((l) => l.message === '$ npm ci')).toBe(false);
    expect(twoLog.some((l) => /npm ci: skipped/.test(l.message))).toBe(true);
    expect((await call('GET', `/threads/${thread}/state`)).body.values).toMatchObject({ count: 2 });
    expect(await runOnThread()).toMatchObject({ count: 3, answer: 'revision two' });

    // kill -9 of the agent while `npm ci` of revision 3 runs: nothing of that build is left.
    await new Promise((r) => setTimeout(r, 3500));
    // package.json changes (not the lock file's packages): the stored packages do not fit, npm ci runs.
    const manifest = JSON.parse(repo.read('package.json')) as Record<string, unknown>;
    repo.commit(
      { 'src/graph.mjs': counting('revision three'), 'package.json': JSON.stringify({ ...manifest, description: 'revision three' }, null, 2) },
      'Revision three',
    );
    const third = await api.post(`/v2/deployments/${id}/revisions`, {});
    const buildDir = join(workDir, id, third.body.id as string);
    await eventually(
      async () => {
        const logs = (await api.get(`/v2/deployments/${id}/revisions/${third.body.id}/logs?type=build&limit=1000`)).body.logs as Array<{ message: string }>;
        return logs.some((l) => l.message === '$ npm ci') && processesIn(buildDir).length > 0 ? true : undefined;
      },
      120_000,
      20,
    );
    await second.stop('SIGKILL');
    await eventually(async () => (processesIn(buildDir).length === 0 ? true : undefined), 10_000);
    // A new agent takes the revision over once the lease lapsed; the build log says an attempt was lost.
    await start();
    const three = await revisionReaches(api, id, third.body.id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(three.status, three.status_message).toBe('DEPLOYED');
    const log = (await api.get(`/v2/deployments/${id}/revisions/${three.id}/logs?type=build&limit=1000`)).body.logs as Array<{ message: string }>;
    expect(log.some((l) => /an earlier attempt at this revision was lost/.test(l.message))).toBe(true);
    expect(await runOnThread()).toMatchObject({ count: 4, answer: 'revision three' });
  });
});
