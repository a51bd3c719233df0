import { describe, expect, it } from 'vitest';
import { AgentClient } from '../../agent/client.ts';
import { LogStream } from '../../agent/log-stream.ts';
import { agentRoutesOverLoopback } from '../helpers/agent-routes-over-loopback.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';

/**
 * A claim's build and deploy lines carry the time the agent saw them, not the time their batch
 * reached the control plane (the stages of a push are read from these times): the agent's log
 * stream on a movable clock, against the real control plane served over loopback HTTP.
 */
describe('the local agent’s log lines keep the times the agent saw them', () => {
  const scene = agentRoutesOverLoopback('stamp-machine');

  it('stores each line at its own time, one batch or not, and equal times strictly increasing', async () => {
    const client = new AgentClient({ url: scene.url, token: scene.listener.token, listenerId: scene.listener.listenerId });
    const created = await scene.t.api.post('/v2/deployments', dockerBody(uniqueName('stamps'), scene.listener.listenerId));
    expect(created.status).toBe(201);
    const work = await client.claim('stamp-agent', 5);
    expect(work?.deployment.id).toBe(created.body.id);
    // A minute ago, so the server's cap (never later than its now) leaves the times as they are.
    let now = Date.now() - 60_000;
    const logs = new LogStream(
      client,
      work!.claim_id,
      () => undefined,
      3_600_000,
      () => undefined,
      undefined,
      () => now,
    );
    // Given after a move, with the time the claim came (earlier than the clock's now).
    logs.line('build', 'claimed', 'info', now - 120);
    logs.line('build', 'fetching');
    now += 650;
    logs.line('build', 'checked out');
    now += 2_900;
    logs.line('deploy', 'server healthy');
    logs.line('deploy', 'serving');
    // One batch, sent well after every line was seen.
    await logs.flush();
    const read = async (type: string) =>
      (await scene.t.api.get(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}/logs?type=${type}&limit=100`)).body
        .logs as Array<{
        message: string;
        timestamp: string;
      }>;
    const build = await read('build');
    const deploy = await read('deploy');
    const at = (lines: Array<{ message: string; timestamp: string }>, message: string) => Date.parse(lines.find((l) => l.message === message)!.timestamp);
    expect(at(build, 'fetching') - at(build, 'claimed')).toBe(120);
    expect(at(build, 'checked out') - at(build, 'fetching')).toBe(650);
    expect(at(deploy, 'server healthy') - at(build, 'fetching')).toBe(3_550);
    // Seen in the same millisecond: the later one is stored 1 ms after, so a follower by time misses neither.
    expect(at(deploy, 'serving') - at(deploy, 'server healthy')).toBe(1);
  });
});
