import { mkdtempSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SANDBOX_AGENT_MODULES } from '../../agent/sandbox.ts';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { type AgentProcess, graphRepo, hostFetch, killLeftoverServers, localScene, serverPidOf, startAgent } from './harness.ts';

/** Listens on `port` of 127.0.0.1 if it is free; null when taken. */
function squat(port: number, onConnection: () => void): Promise<Server | null> {
  return new Promise((resolve) => {
    const server = createServer((socket) => {
      onConnection();
      socket.destroy();
    });
    server.once('error', () => resolve(null));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => resolve(server));
  });
}

/**
 * The port race of the attack: the agent used to choose a loopback port, release it, and have the
 * server bind it seconds later; a process listening there first got the victim's traffic. Here a
 * squatter holds every loopback port it can while the victim deploys (every odd one of the
 * ephemeral range, where Linux puts a `listen(0)`; the even ones stay for the system's outgoing
 * connections, and the process's file limit allows no more); the victim's traffic never reaches it,
 * because its server listens in a network namespace of its own, reached through a unix socket.
 */
describe('the proxy → server channel', () => {
  let server: ServerProcess | undefined;
  let agent: AgentProcess | undefined;
  const squatters: Server[] = [];
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-race-'));

  afterAll(async () => {
    for (const squatter of squatters) squatter.close();
    await agent?.stop('SIGINT');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  it('never gives the victim’s traffic to a process squatting loopback ports while it deploys', { timeout: 600_000 }, async () => {
    const scene = await localScene();
    server = scene.server;
    const { api, integrationId, listenerId, token } = scene;
    agent = await startAgent({ url: server.url, token, listenerId, workDir });
    let received = 0;
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number) as [number, number];
    // Every odd port of the ephemeral range: where a listen(0) lands on Linux (the agent's old way
    // of choosing a port), leaving the even ones to outgoing connections; within the file limit.
    const ports = Array.from({ length: high - low + 1 }, (_, i) => low + i).filter((p) => p % 2 === 1);
    for (let i = 0; i < ports.length; i += 500) {
      const held = await Promise.all(ports.slice(i, i + 500).map((port) => squat(port, () => (received += 1))));
      for (const squatter of held) if (squatter) squatters.push(squatter);
    }
    expect(squatters.length).toBeGreaterThan(1000);

    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('race'), integrationId, {
        source_config: {
          integration_id: integrationId,
          repo_url: graphRepo().url,
          deployment_type: 'dev',
          build_on_push: false,
          install_command: `ln -s ${SANDBOX_AGENT_MODULES} node_modules`,
        },
      }),
    );
    expect(created.status).toBe(201);
    const revision = await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 300_000);
    expect(revision.status, `${revision.status_message}\n${agent.output()}`).toBe('DEPLOYED');
    // The deployment's URL as given (the path form on the proxy, the agent's default).
    const host = (await api.get(`/v2/deployments/${created.body.id}`)).body.source_config.custom_url;
    for (let i = 0; i < 20; i += 1) {
      const answer = await hostFetch(agent.proxyPort, host, '/assistants/search', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer a-customer-credential' },
        body: '{}',
      });
      expect(answer.status).toBe(200);
    }
    expect(received).toBe(0);
    // Where the server is: a socket in the deployment's folder, in a network namespace that is not this one.
    const buildDir = join(workDir, created.body.id, revision.id);
    const record = JSON.parse(readFileSync(join(`${buildDir}.agent`, 'server.json'), 'utf8')) as { port?: number; socketPath?: string };
    expect(record.port).toBeUndefined();
    expect(record.socketPath).toBe(join(workDir, '.s', revision.id, 'server.sock'));
    const serverPid = serverPidOf(buildDir);
    const children = readFileSync(`/proc/${serverPid}/task/${serverPid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    const inner = [serverPid, ...children.map(Number)].map((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/ns/net`);
      } catch {
        return null;
      }
    });
    expect(inner.some((ns) => ns !== null && ns !== readlinkSync('/proc/self/ns/net'))).toBe(true);
  });
});
