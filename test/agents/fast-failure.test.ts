import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Api } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { type AgentProcess, graphRepo, killLeftoverServers, localScene, runGraph, startAgent } from './harness.ts';

type LogLine = { timestamp: string; message: string; level: string };

const logsOf = async (api: Api, deploymentId: string, revisionId: string, type: 'build' | 'deploy') =>
  (await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}/logs?type=${type}&limit=1000`)).body.logs as LogLine[];

/**
 * A graph that does not load fails its revision fast, with the error's own line: the real agent,
 * server, npm ci and LangGraph.js API server, and a real git repository.
 */
describe('a graph that does not load', () => {
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-fail-'));

  afterAll(async () => {
    await agent?.stop('SIGTERM');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  it('is DEPLOY_FAILED within 10 s with its error line (a syntax error, a missing graph file), and the previous revision keeps serving', {
    timeout: 600_000,
  }, async () => {
    const scene = await localScene();
    server = scene.server;
    const { api, integrationId, listenerId, token } = scene;
    agent = await startAgent({ url: server.url, token, listenerId, workDir });
    const repo = graphRepo();
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('fails'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: repo.url, deployment_type: 'dev', build_on_push: false },
      }),
    );
    expect(created.status).toBe(201);
    const deploymentId = created.body.id as string;
    const first = await revisionReaches(api, deploymentId, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(first.status, first.status_message).toBe('DEPLOYED');
    const host = (await api.get(`/v2/deployments/${deploymentId}`)).body.source_config.custom_url;

    const broken = async (files: Record<string, string>, message: string) => {
      repo.commit(files, message);
      const revision = await api.post(`/v2/deployments/${deploymentId}/revisions`, {});
      expect(revision.status, JSON.stringify(revision.body)).toBe(201);
      const failed = await revisionReaches(api, deploymentId, revision.body.id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
      const deployLog = await logsOf(api, deploymentId, failed.id, 'deploy');
      const started = Date.parse(deployLog[0]!.timestamp);
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
