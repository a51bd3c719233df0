import { afterAll, describe, expect, it } from 'vitest';
import { ClaimLoop } from '../../agent/claim-loop.ts';
import { AgentClient } from '../../agent/client.ts';
import { apiClient, eventually } from '../helpers/api.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

/**
 * The claim loop both agents share, against a real server process that stops and starts again on
 * the same port: it says once that claims fail, and once that they work again.
 */
describe('the claim loop when the control plane restarts', () => {
  let server: ServerProcess | undefined;
  let loop: ClaimLoop | undefined;
  afterAll(async () => {
    await loop?.stop();
    await server?.kill();
  });

  it('says once that the server does not answer and once that it answers again, not a line per failed claim or heartbeat', { timeout: 60_000 }, async () => {
    server = await startServerProcess({ AGENT_LEASE_MS: '3000' });
    const api = apiClient(server.url, server.apiKey);
    const listener = await api.post('/v2/listeners', { compute_type: 'local', compute_id: `loop-${crypto.randomUUID().slice(0, 8)}` });
    const token = (await api.post(`/v2/listeners/${listener.body.id}/tokens`)).body.token as string;
    const lines: string[] = [];
    loop = new ClaimLoop(
      {
        client: new AgentClient({ url: server.url, token, listenerId: listener.body.id }),
        agentId: 'loop-test',
        version: 'test',
        capacity: 1,
        print: (line) => lines.push(line),
        waitSeconds: 1,
      },
      async () => {},
    );
    await loop.start();

    const port = server.port;
    await server.kill('SIGTERM');
    // Several claims fail while nothing listens on the port (one a second).
    await eventually(async () => (lines.some((l) => l.includes('does not answer')) ? true : undefined), 10_000);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    server = await server.restart({ PORT: String(port) });
    const back = await eventually(async () => lines.find((l) => l.includes('answers again')), 15_000);

    // Claims and heartbeats failed several times: two lines in all.
    expect(lines.filter((l) => l.includes('does not answer'))).toHaveLength(1);
    expect(lines.filter((l) => l.includes('answers again'))).toHaveLength(1);
    expect(lines.some((l) => l.includes('claim failed') || l.includes('heartbeat failed'))).toBe(false);
    expect(back).toMatch(/after \d+\.\d s and ([2-9]|\d\d+) failed calls/);
  });
});
