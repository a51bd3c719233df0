import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentCall } from '../helpers/agent-call.ts';
import { eventually } from '../helpers/api.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;
type Line = { id: string; timestamp: string; level: string; message: string };

/**
 * `langgraph deploy logs -f --limit N` as the CLI (deploy.py, deploy_logs) runs it: one `desc` page
 * printed oldest first, then every 2 s an `asc` page from `start_time` = the newest timestamp seen,
 * printing the lines whose ids it has not seen. Lines that share a timestamp used to stall it: with
 * N of them at `start_time`, every page was lines already seen. Runtime lines come from an agent's
 * runtime-logs route, as the local agent sends them (in batches, with or without their own times).
 */
describe('langgraph deploy logs -f, replayed, on runtime log lines', () => {
  let t: App;
  let listenerId: string;
  let token: string;
  beforeAll(async () => {
    t = await inProcessApp();
    const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: `follow-${uniqueName()}` });
    listenerId = listener.body.id;
    token = (await t.api.post(`/v2/listeners/${listenerId}/tokens`)).body.token;
  });
  afterAll(() => t.close());

  /** A deployment whose revision an "agent" (these calls) moved to DEPLOYED: its runtime lines are accepted. */
  async function liveRevision(): Promise<{ deploymentId: string; revisionId: string }> {
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('follow'), listenerId));
    const work = await eventually(async () => {
      const w = (await agentCall(t.app, listenerId, token, '/claim', { agent_id: 'follower', wait_seconds: 0 })).body.work;
      return w?.deployment.id === created.body.id ? w : undefined;
    }, 5000);
    let from = work.revision.status as string;
    for (const to of ['DEPLOYING', 'DEPLOYED']) {
      if (from === 'AWAITING_DEPLOY' || to === 'DEPLOYED') {
        const moved = await agentCall(t.app, listenerId, token, `/claims/${work.claim_id}/transition`, { from, to });
        expect(moved.status, JSON.stringify(moved.body)).toBe(200);
        from = to;
      }
    }
    return { deploymentId: created.body.id, revisionId: created.body.latest_revision_id };
  }

  async function print(revisionId: string, lines: Array<{ message: string; timestamp?: string }>) {
    const sent = await agentCall(t.app, listenerId, token, `/revisions/${revisionId}/runtime-logs`, { lines });
    expect(sent.status, JSON.stringify(sent.body)).toBe(200);
    expect(sent.body.stored).toBe(lines.length);
  }

  async function deployLogs(deploymentId: string, body: Record<string, unknown>): Promise<Line[]> {
    const answer = await t.api.post(`/v1/projects/${deploymentId}/deploy_logs`, body);
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    return answer.body.logs;
  }

  it('shows every new line once, in order, though the agent sent them in batches within one millisecond', async () => {
    const { deploymentId, revisionId } = await liveRevision();
    const batch = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ message: `line ${from + i}` }));
    await print(revisionId, batch(1, 5));

    // The CLI: the newest `limit` lines, printed oldest first; then follow from the newest one's time.
    const limit = 3;
    const printed: string[] = [];
    const payload: Record<string, unknown> = { limit, order: 'desc' };
    const first = await deployLogs(deploymentId, payload);
    printed.push(...first.toReversed().map((l) => l.message));
    const seen = new Set(first.map((l) => l.id));
    payload.order = 'asc';
    payload.start_time = first[0]!.timestamp;
    const followOnce = async () => {
      const fresh = (await deployLogs(deploymentId, payload)).filter((l) => !seen.has(l.id));
      for (const line of fresh) {
        printed.push(line.message);
        seen.add(line.id);
      }
      if (fresh.length > 0) payload.start_time = fresh.at(-1)!.timestamp;
      return fresh.length;
    };

    // Batches of more lines than the follower's page, each sent at once (one "now" on the server).
    await print(revisionId, batch(6, 5));
    await print(revisionId, batch(11, 7));
    // And lines that report one and the same printing time.
    const sameInstant = new Date(Date.now() - 1000).toISOString();
    await print(revisionId, [
      { message: 'line 18', timestamp: sameInstant },
      { message: 'line 19', timestamp: sameInstant },
      { message: 'line 20', timestamp: sameInstant },
      { message: 'line 21', timestamp: sameInstant },
    ]);
    let polls = 0;
    while ((await followOnce()) > 0) polls += 1;
    expect(polls).toBeGreaterThan(1);
    expect(printed).toEqual(Array.from({ length: 19 }, (_, i) => `line ${i + 3}`));

    // Times increase strictly in the order the lines were printed, never later than the server's clock.
    const all = await deployLogs(deploymentId, { limit: 100, order: 'asc' });
    const times = all.map((l) => Date.parse(l.timestamp));
    for (let i = 1; i < times.length; i += 1) expect(times[i]).toBeGreaterThan(times[i - 1]!);
    expect(times.at(-1)).toBeLessThanOrEqual(Date.now() + 50);
  });

  it('keeps a line’s own time when it is later than the line before, and never stores a time from the future', async () => {
    const { deploymentId, revisionId } = await liveRevision();
    const past = new Date(Date.now() - 500).toISOString();
    await print(revisionId, [{ message: 'printed half a second ago', timestamp: past }]);
    await print(revisionId, [{ message: 'from an agent whose clock runs an hour ahead', timestamp: new Date(Date.now() + 3_600_000).toISOString() }]);
    const lines = await deployLogs(deploymentId, { limit: 10, order: 'asc' });
    const own = lines.find((l) => l.message.startsWith('printed'));
    const ahead = lines.find((l) => l.message.startsWith('from an agent'));
    expect(own).toMatchObject({ message: 'printed half a second ago', timestamp: past });
    expect(Date.parse(ahead!.timestamp)).toBeLessThanOrEqual(Date.now());
    const bad = await agentCall(t.app, listenerId, token, `/revisions/${revisionId}/runtime-logs`, { lines: [{ message: 'x', timestamp: 'yesterday' }] });
    expect(bad.status).toBe(422);
  });
});
