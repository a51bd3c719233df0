import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_SOCKET_ROOT, socketRootOf } from '../../agent/socket-root.ts';
import { agentTestScene, deployedRepo, graphRepo, hostFetch, LINK_AGENT_MODULES } from './harness.ts';

/**
 * A checkout under a long path (CI clones, home folders) with the default `./data/agent`: the
 * sandboxed servers' unix sockets would not fit 107 bytes under it, so they live in a short folder
 * standing for the work directory, which the agent restarted on the same work directory finds again.
 * Real agent, bwrap, pasta, the LangGraph.js API server.
 */
describe('a sandboxed agent with a long work directory', () => {
  const base = mkdtempSync(join(tmpdir(), 'cp-agent-long-'));
  // A checkout's folders as a home folder has them: the sandbox user's bwrap passes through them.
  chmodSync(base, 0o755);
  const checkout = join(base, 'home', 'a-developer', 'checkouts', 'control-plane');
  mkdirSync(checkout, { recursive: true, mode: 0o755 });
  const workDir = join(checkout, 'data', 'agent');
  // Registered first, so it runs after the scene's clean-up has ended the servers (hooks run as a stack).
  afterAll(() => rmSync(socketRootOf(workDir), { recursive: true, force: true }));
  const scenes = agentTestScene(workDir, 'SIGINT');

  it('deploys and serves, its sockets in a short folder it finds again after a restart', { timeout: 600_000 }, async () => {
    expect(Buffer.byteLength(workDir)).toBeGreaterThan(60);
    const scene = await scenes.start();
    const { id, revision, url } = await deployedRepo(scene, graphRepo().url, { prefix: 'long', sourceConfig: { install_command: LINK_AGENT_MODULES } });
    let agent = scene.agent;
    const search = () => hostFetch(agent.proxyPort, url, '/assistants/search', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect((await search()).status).toBe(200);

    const root = socketRootOf(workDir);
    expect(root).not.toBe(workDir);
    expect(Buffer.byteLength(root)).toBeLessThanOrEqual(MAX_SOCKET_ROOT);
    // The agent's own, passed through by the sandbox user's bwrap, listable by nobody else.
    const made = statSync(root);
    expect(made.uid).toBe(process.getuid!());
    expect(made.mode & 0o077).toBe(made.mode & 0o011);
    const record = JSON.parse(readFileSync(join(workDir, id, `${revision.id}.agent`, 'server.json'), 'utf8')) as { socketPath?: string };
    expect(record.socketPath).toBe(join(root, '.s', revision.id, 'server.sock'));

    // Restarted on the same work directory: the same folder, the server taken over, still serving.
    const proxyPort = agent.proxyPort;
    await agent.stop('SIGTERM');
    agent = await scenes.agent(scene, { proxyPort });
    expect(agent.output()).toContain(`they live in ${root}`);
    expect(agent.output()).toMatch(/took over the agent server/);
    expect((await search()).status).toBe(200);
  });
});
