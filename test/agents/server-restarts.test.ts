import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentTestScene, deployedRepo, graphRepo, hostFetch, LINK_AGENT_MODULES, runGraph } from './harness.ts';

/**
 * A graph whose one node ends its server's process: `process.kill` of the server's own pid, which
 * ends the whole server whether the graph runs on its main thread or a worker (where
 * `process.exit` would end only the worker).
 */
const EXITING_GRAPH = `import { Annotation, END, START, StateGraph } from '@langchain/langgraph';
const State = Annotation.Root({ answer: Annotation() });
export const graph = new StateGraph(State)
  .addNode('respond', () => { process.kill(process.pid, 'SIGKILL'); return { answer: 'never' }; })
  .addEdge(START, 'respond')
  .addEdge('respond', END)
  .compile();
`;

/**
 * Contract §15: a server that exits after DEPLOYED is restarted (at most 3 times in 10 minutes),
 * then its revision is reported failed: DEPLOY_FAILED with the cause, in its status and its deploy log. Real agent, bwrap, the LangGraph.js
 * API server, a graph that kills its server on every run.
 */
describe('a live server that exits', () => {
  const scenes = agentTestScene(mkdtempSync(join(tmpdir(), 'cp-agent-exits-')), 'SIGINT');

  it('is restarted three times and answers again each time; the fourth exit fails the revision (DEPLOY_FAILED) with a deploy log line saying why', {
    timeout: 600_000,
  }, async () => {
    const scene = await scenes.start();
    const { api, agent } = scene;
    const repo = graphRepo();
    repo.commit({ 'src/graph.mjs': EXITING_GRAPH }, 'A graph that ends its server');
    const { id, revision, url } = await deployedRepo(scene, repo.url, { prefix: 'exits', sourceConfig: { install_command: LINK_AGENT_MODULES } });
    const search = () =>
      hostFetch(agent.proxyPort, url, '/assistants/search', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }).catch(
        (error: Error) => ({ status: 0, body: error.message }),
      );
    const until = async <T>(what: string, check: () => Promise<T | null>): Promise<T> => {
      const deadline = Date.now() + 120_000;
      for (;;) {
        const found = await check();
        if (found !== null) return found;
        if (Date.now() > deadline) throw new Error(`${what} did not happen:\n${agent.output()}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    };
    const deployLog = async () =>
      ((await api.get(`/v2/deployments/${id}/revisions/${revision.id}/logs?type=deploy&limit=1000&offset=0`)).body.logs as Array<{
        message: string;
        level: string;
      }>) ?? [];

    for (let restart = 1; restart <= 3; restart += 1) {
      expect((await search()).status).toBe(200);
      // The run ends the server: the request fails (how is the proxy's business), the server comes back.
      await runGraph(agent.proxyPort, url).catch(() => undefined);
      await until(`restart ${restart}`, async () =>
        agent.output().includes(`restarting it (restart ${restart} of 3 in 10 minutes)`) && (await search()).status === 200 ? true : null,
      );
    }
    await runGraph(agent.proxyPort, url).catch(() => undefined);
    // The revision is failed in its status, with the cause as its message and its deploy log's line.
    const ended = await until('the report of the fourth exit', async () => {
      const now = (await api.get(`/v2/deployments/${id}/revisions/${revision.id}`)).body;
      return now.status === 'DEPLOYED' ? null : now;
    });
    expect(ended.status).toBe('DEPLOY_FAILED');
    expect(ended.status_message).toMatch(/failed: its agent server .* the 4th exit in 10 minutes, and is not restarted again/);
    const failed = (await deployLog()).find((l) => l.message === ended.status_message);
    expect(failed?.level).toBe('error');
    const log = await deployLog();
    for (let restart = 1; restart <= 3; restart += 1)
      expect(log.some((l) => l.message.includes(`restarting it (restart ${restart} of 3 in 10 minutes)`))).toBe(true);
    // Nothing serves it any more.
    expect((await search()).status).toBe(404);
  });
});
