import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Api } from '../helpers/api.ts';
import { revisionReaches } from '../helpers/fixtures.ts';
import { agentTestScene, deployedRepo, graphRepo, LINK_AGENT_MODULES, runGraph, SETTLED } from './harness.ts';

type LogLine = { timestamp: string; message: string; level: string };

const logsOf = async (api: Api, deploymentId: string, revisionId: string, type: 'build' | 'deploy') =>
  (await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}/logs?type=${type}&limit=1000`)).body.logs as LogLine[];

/**
 * A graph that does not load fails its revision fast, with the error's own line: the real agent,
 * server and LangGraph.js API server, and a real git repository.
 */
describe('a graph that does not load', () => {
  const scenes = agentTestScene(mkdtempSync(join(tmpdir(), 'cp-agent-fail-')));

  it('is DEPLOY_FAILED within 10 s with its error line (a syntax error, a missing graph file), and the previous revision keeps serving', {
    timeout: 600_000,
  }, async () => {
    const scene = await scenes.start();
    const { api, agent } = scene;
    const repo = graphRepo();
    // The graph's packages are the agent's own, linked: what fails here is the graph, not an install.
    const { id: deploymentId, url: host } = await deployedRepo(scene, repo.url, { prefix: 'fails', sourceConfig: { install_command: LINK_AGENT_MODULES } });

    const broken = async (files: Record<string, string>, message: string) => {
      repo.commit(files, message);
      const revision = await api.post(`/v2/deployments/${deploymentId}/revisions`, {});
      expect(revision.status, JSON.stringify(revision.body)).toBe(201);
      const failed = await revisionReaches(api, deploymentId, revision.body.id, SETTLED, 300_000);
      const deployLog = await logsOf(api, deploymentId, failed.id, 'deploy');
      // From the server's first line (the agent's own "starting the agent server" comes before Node has loaded anything).
      const started = Date.parse(deployLog.find((line) => line.message !== 'starting the agent server')!.timestamp);
      const ended = Date.parse(deployLog.at(-1)!.timestamp);
      return { failed, deployLog, seconds: (ended - started) / 1000 };
    };

    const syntax = await broken({ 'src/graph.mjs': 'export const graph = ;\n' }, 'A syntax error');
    expect(syntax.failed.status, syntax.deployLog.map((l) => l.message).join('\n')).toBe('DEPLOY_FAILED');
    expect(syntax.seconds).toBeLessThan(10);
    expect(syntax.failed.status_message.split('\n')[0]).toMatch(/^SyntaxError: Unexpected token/);
    expect(syntax.failed.status_message).not.toMatch(/\x1b\[|^\s+at /m);
    // Every stored line is plain, with the level the server printed.
    expect(syntax.deployLog.some((l) => l.message.includes('\x1b['))).toBe(false);
    expect(syntax.deployLog.some((l) => l.level === 'error' && /SyntaxError/.test(l.message))).toBe(true);
    expect((await runGraph(agent.proxyPort, host)).body.answer).toBe('the first answer');

    const missing = await broken(
      {
        'src/graph.mjs': repo.read('src/graph.mjs').replace('export const graph = ;\n', ''),
        'langgraph.json': JSON.stringify({ node_version: '20', graphs: { agent: './src/missing.mjs:graph' } }),
      },
      'A graph file that is not there',
    );
    expect(missing.failed.status, missing.deployLog.map((l) => l.message).join('\n')).toBe('DEPLOY_FAILED');
    expect(missing.seconds).toBeLessThan(10);
    expect(missing.failed.status_message.split('\n')[0]).toMatch(/Cannot find module|ERR_MODULE_NOT_FOUND|missing\.mjs/);
    expect(missing.failed.status_message).not.toMatch(/\x1b\[|^\s+at /m);
    expect((await runGraph(agent.proxyPort, host)).body.answer).toBe('the first answer');
    console.log(
      `fast failure: syntax error ${syntax.seconds} s, missing file ${missing.seconds} s; messages: ${JSON.stringify([syntax.failed.status_message, missing.failed.status_message])}`,
    );
  });
});
