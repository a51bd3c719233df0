import { describe, expect, it } from 'vitest';
import { AgentClient } from '../../agent/client.ts';
import { batchesOf, LogStream, MAX_BATCH_BYTES, MAX_LINE } from '../../agent/log-stream.ts';
import { agentRoutesOverLoopback } from '../helpers/agent-routes-over-loopback.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';

/**
 * The agent's log stream against the real control plane served over loopback HTTP (its agent
 * routes, their 1 MiB body limit, a real SQLite log table).
 */
describe('the local agent’s log stream', () => {
  const scene = agentRoutesOverLoopback('log-machine');

  const claimed = async (client: AgentClient) => {
    const created = await scene.t.api.post('/v2/deployments', dockerBody(uniqueName('logs'), scene.listener.listenerId));
    expect(created.status).toBe(201);
    const work = await client.claim('log-agent', 5);
    expect(work?.deployment.id).toBe(created.body.id);
    return { deploymentId: created.body.id as string, revisionId: created.body.latest_revision_id as string, claimId: work!.claim_id };
  };
  const storedLines = async (deploymentId: string, revisionId: string) => {
    const messages: string[] = [];
    for (let offset: number | null = 0; offset !== null; ) {
      const page: { status: number; body: any } = await scene.t.api.get(
        `/v2/deployments/${deploymentId}/revisions/${revisionId}/logs?type=deploy&limit=1000&offset=${offset}`,
      );
      expect(page.status).toBe(200);
      messages.push(...(page.body.logs as Array<{ message: string }>).map((l) => l.message));
      offset = page.body.logs.length === 0 ? null : page.body.next_offset;
    }
    return messages;
  };

  it('delivers 500 lines of 8000 characters (≈ 4 MB, four times the body limit) in requests the API accepts', async () => {
    const client = new AgentClient({ url: scene.url, token: scene.listener.token, listenerId: scene.listener.listenerId });
    const { deploymentId, revisionId, claimId } = await claimed(client);
    const reports: string[] = [];
    const gone: unknown[] = [];
    const logs = new LogStream(
      client,
      claimId,
      (error) => gone.push(error),
      60_000,
      (message) => reports.push(message),
    );
    // Multi-byte characters too: the limit is on bytes, not characters.
    for (let i = 0; i < 500; i += 1) logs.line('deploy', `${String(i).padStart(3, '0')} ${(i % 2 ? 'x' : 'é').repeat(MAX_LINE - 4)}`);
    // One line far over the per-line limit: kept, cut, and marked as cut.
    logs.line('deploy', `long ${'y'.repeat(200_000)}`);
    await logs.flush();
    expect(reports).toEqual([]);
    expect(gone).toEqual([]);
    const stored = await storedLines(deploymentId, revisionId);
    expect(stored.length).toBe(501);
    expect(stored.slice(0, 500).map((m) => m.slice(0, 3))).toEqual(Array.from({ length: 500 }, (_, i) => String(i).padStart(3, '0')));
    expect(stored[500]!.startsWith('long yyy')).toBe(true);
    expect(stored[500]).toContain('[line truncated by the agent: ');
    expect(stored[500]!.length).toBeLessThan(MAX_LINE + 100);
  });

  it('keeps every batch under the byte budget, whatever the lines', () => {
    const lines = Array.from({ length: 2000 }, (_, i) => ({
      type: 'build' as const,
      level: 'info' as const,
      message: '\u0001'.repeat(i % 7 === 0 ? MAX_LINE : 40),
    }));
    const batches = batchesOf(lines);
    expect(batches.flat().length).toBe(2000);
    for (const batch of batches) {
      expect(batch.length).toBeLessThanOrEqual(500);
      // Control characters are escaped six bytes each in JSON: measured on the body actually sent.
      expect(Buffer.byteLength(JSON.stringify({ lines: batch }))).toBeLessThanOrEqual(MAX_BATCH_BYTES);
    }
  });

  it('says on stderr when a send fails for another reason than the work being gone', async () => {
    const client = new AgentClient({ url: scene.url, token: scene.listener.token, listenerId: scene.listener.listenerId });
    const { claimId } = await claimed(client);
    // A revoked token: every send is refused (401), the lines cannot be delivered.
    const other = await scene.t.api.post(`/v2/listeners/${scene.listener.listenerId}/tokens`);
    const revoked = new AgentClient({ url: scene.url, token: other.body.token as string, listenerId: scene.listener.listenerId });
    expect((await scene.t.api.delete(`/v2/listeners/${scene.listener.listenerId}/tokens/${other.body.id}`)).status).toBe(204);
    const reports: string[] = [];
    const logs = new LogStream(
      revoked,
      claimId,
      () => undefined,
      60_000,
      (message) => reports.push(message),
    );
    logs.line('build', 'npm ERR! something');
    logs.line('build', 'another line');
    await logs.flush();
    expect(reports.length).toBe(1);
    expect(reports[0]).toContain('could not send 2 build log line(s)');
    expect(reports[0]).toContain('401');
    expect(reports[0]).not.toContain(other.body.token as string);
  });
});
