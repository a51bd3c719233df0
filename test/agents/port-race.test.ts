import { mkdtempSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { agentTestScene, deployedRepo, graphRepo, hostFetch, LINK_AGENT_MODULES, serverPidOf } from './harness.ts';

/** Listens on `port` of 127.0.0.1 if it is free; null when taken. */
/** Holds `port`; hands over the first bytes of whatever request a connection sends, then drops it. */
function squat(port: number, onRequest: (head: string) => void): Promise<Server | null> {
  return new Promise((resolve) => {
    const server = createServer((socket) => {
      socket.once('data', (chunk) => {
        onRequest(chunk.toString('latin1', 0, 4096));
        socket.destroy();
      });
      socket.once('error', () => socket.destroy());
      socket.setTimeout(5_000, () => socket.destroy());
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
  const squatters: Server[] = [];
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-race-'));
  const scenes = agentTestScene(workDir, 'SIGINT');

  afterAll(() => {
    for (const squatter of squatters) squatter.close();
  });

  it('never gives the victim’s traffic to a process squatting loopback ports while it deploys', { timeout: 600_000 }, async () => {
    const scene = await scenes.start();
    const { agent } = scene;
    // What reached a squatter. Other test files run beside this one on the same loopback, and a
    // port one of them chose and released can be squatted here: their requests are not the
    // victim's. The victim's are the ones carrying its customer's credential, its deployment's id,
    // or the agent's health check of its server (`GET /ok`).
    const heads: string[] = [];
    const [low, high] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number) as [number, number];
    // Every odd port of the ephemeral range: where a listen(0) lands on Linux (the agent's old way
    // of choosing a port), leaving the even ones to outgoing connections; within the file limit.
    const ports = Array.from({ length: high - low + 1 }, (_, i) => low + i).filter((p) => p % 2 === 1);
    for (let i = 0; i < ports.length; i += 500) {
      const held = await Promise.all(ports.slice(i, i + 500).map((port) => squat(port, (head) => heads.push(head))));
      for (const squatter of held) if (squatter) squatters.push(squatter);
    }
    expect(squatters.length).toBeGreaterThan(1000);

    const { id, revision, url: host } = await deployedRepo(scene, graphRepo().url, { prefix: 'race', sourceConfig: { install_command: LINK_AGENT_MODULES } });
    // The deployment's URL as given (the path form on the proxy, the agent's default).
    for (let i = 0; i < 20; i += 1) {
      const answer = await hostFetch(agent.proxyPort, host, '/assistants/search', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer a-customer-credential' },
        body: '{}',
      });
      expect(answer.status).toBe(200);
    }
    const victims = heads.filter((head) => head.includes('a-customer-credential') || head.includes(id) || /^GET \/ok[ ?]/.test(head));
    expect(victims).toEqual([]);
    // Where the server is: a socket in the deployment's folder, in a network namespace that is not this one.
    const buildDir = join(workDir, id, revision.id);
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
