import { afterEach, describe, expect, it } from 'vitest';
import { agentCall } from '../helpers/agent-call.ts';
import { testBackendKind } from '../helpers/backends.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * Log volume is bounded: a revision keeps at most its cap of lines and bytes, then one marker
 * line ("log truncated: N lines dropped") and nothing more, while its status changes still land;
 * an agent token appending faster than its rate gets 429 with Retry-After and stores nothing of
 * that request. Runs on the backend of the project (`postgres` runs it through vitest.config.ts).
 */

type App = Awaited<ReturnType<typeof inProcessApp>>;
const opened: App[] = [];
afterEach(async () => {
  for (const app of opened.splice(0)) await app.close();
});

async function agentOnNewDeployment(env: Record<string, string>) {
  const t = await inProcessApp({ env: { AGENT_LEASE_MS: '60000', ...env } });
  opened.push(t);
  const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: uniqueName('caps') });
  const token = (await t.api.post(`/v2/listeners/${listener.body.id}/tokens`)).body.token as string;
  const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('caps'), listener.body.id));
  const work = (await agentCall(t.app, listener.body.id, token, '/claim', { agent_id: 'caps', wait_seconds: 0 })).body.work;
  const claimPath = `/claims/${work.claim_id}`;
  expect((await agentCall(t.app, listener.body.id, token, `${claimPath}/transition`, { from: 'AWAITING_DEPLOY', to: 'DEPLOYING' })).status).toBe(200);
  const append = (messages: string[]) =>
    agentCall(t.app, listener.body.id, token, `${claimPath}/logs`, { lines: messages.map((message) => ({ type: 'deploy', message })) });
  const stored = async () => {
    const page = await t.api.get(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}/logs?type=deploy&limit=1000`);
    return page.body.logs.map((l: { message: string }) => l.message) as string[];
  };
  const storedBytes = async () =>
    Number(
      (
        (await t.sql.get(
          `SELECT coalesce(sum(${testBackendKind() === 'postgres' ? 'octet_length' : 'length'}(message)), 0) AS n FROM revision_logs WHERE revision_id = ?`,
          created.body.latest_revision_id,
        )) as { n: number | string }
      ).n,
    );
  // The whole response, for its headers; `bearer` may be another token of the listener.
  const appendRaw = (bearer: string, messages: string[]) =>
    Promise.resolve(
      t.app.request(`/v2/listeners/${listener.body.id}/agent${claimPath}/logs`, {
        method: 'POST',
        headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
        body: JSON.stringify({ lines: messages.map((message) => ({ type: 'deploy', message })) }),
      }),
    );
  // Once DEPLOYED, what the revision's server prints arrives through the runtime-logs route.
  const deployed = () => agentCall(t.app, listener.body.id, token, `${claimPath}/transition`, { from: 'DEPLOYING', to: 'DEPLOYED' });
  const appendRuntime = (messages: string[]) =>
    agentCall(t.app, listener.body.id, token, `/revisions/${created.body.latest_revision_id}/runtime-logs`, {
      lines: messages.map((message) => ({ message })),
    });
  const fail = () =>
    agentCall(t.app, listener.body.id, token, `${claimPath}/transition`, { from: 'DEPLOYING', to: 'DEPLOY_FAILED', status_message: 'the server exited' });
  return { t, listenerId: listener.body.id as string, token, append, appendRaw, stored, storedBytes, deployed, appendRuntime, fail };
}

const FAST = { LOG_TOKEN_LINES_PER_SECOND: '1000000', LOG_TOKEN_BYTES_PER_SECOND: String(1024 ** 3) };

describe(`log caps (${testBackendKind()})`, () => {
  it('keeps a revision’s first lines up to its line cap, then one marker line counting the rest, and still takes its end', async () => {
    const agent = await agentOnNewDeployment({ ...FAST, LOG_REVISION_MAX_LINES: '50' });
    for (let batch = 0; batch < 3; batch++) expect((await agent.append(Array.from({ length: 40 }, (_, i) => `line ${batch * 40 + i}`))).status).toBe(204);
    const lines = await agent.stored();
    expect(lines.slice(0, 50)).toEqual(Array.from({ length: 50 }, (_, i) => `line ${i}`));
    expect(lines.slice(50)).toEqual(['log truncated: 70 lines dropped']);
    const failed = await agent.fail();
    expect(failed.status).toBe(200);
    expect(failed.body).toMatchObject({ status: 'DEPLOY_FAILED', status_message: 'the server exited' });
  });

  it('keeps a revision’s lines up to its byte cap, and drops every later line once one was dropped', async () => {
    const agent = await agentOnNewDeployment({ ...FAST, LOG_REVISION_MAX_BYTES: '4096' });
    expect((await agent.append(Array.from({ length: 10 }, (_, i) => `${i}`.padEnd(1000, 'x')))).status).toBe(204);
    // Small enough to fit, but after a dropped line: dropped too.
    expect((await agent.append(['short'])).status).toBe(204);
    const lines = await agent.stored();
    expect(lines.length).toBe(5);
    expect(lines.slice(0, 4).every((line) => line.length === 1000)).toBe(true);
    expect(lines[4]).toBe('log truncated: 7 lines dropped');
  });

  it('caps a live revision’s runtime lines with the same store cap as its build and deploy lines (the runtime rate aside)', async () => {
    const agent = await agentOnNewDeployment({ ...FAST, LOG_REVISION_MAX_LINES: '30', RUNTIME_LOG_BURST: '10000', RUNTIME_LOG_TOKEN_BURST: '10000' });
    expect((await agent.append(Array.from({ length: 10 }, (_, i) => `deploy ${i}`))).status).toBe(204);
    expect((await agent.deployed()).status).toBe(200);
    const first = await agent.appendRuntime(Array.from({ length: 15 }, (_, i) => `runtime ${i}`));
    expect(first.body).toEqual({ stored: 15, dropped: 0 });
    const second = await agent.appendRuntime(Array.from({ length: 15 }, (_, i) => `runtime ${15 + i}`));
    expect(second.status).toBe(200);
    expect(second.body.dropped).toBeGreaterThanOrEqual(10);
    expect((await agent.appendRuntime(['one more'])).status).toBe(200);
    const lines = await agent.stored();
    expect(lines.slice(0, 30)).toEqual([...Array.from({ length: 10 }, (_, i) => `deploy ${i}`), ...Array.from({ length: 20 }, (_, i) => `runtime ${i}`)]);
    expect(lines.slice(30)).toEqual(['log truncated: 11 lines dropped']);
  });

  it('answers 429 with Retry-After to a token past its rate, storing nothing of that request; another token is not slowed', async () => {
    const agent = await agentOnNewDeployment({ LOG_TOKEN_LINES_PER_SECOND: '100' });
    // A burst of two seconds' worth goes through at once.
    expect((await agent.append(Array.from({ length: 200 }, (_, i) => `burst ${i}`))).status).toBe(204);
    const limited = await agent.appendRaw(
      agent.token,
      Array.from({ length: 200 }, (_, i) => `more ${i}`),
    );
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await limited.json()) as { detail: string }).detail).toContain('LOG_TOKEN_LINES_PER_SECOND');
    expect((await agent.stored()).length).toBe(200);
    // The listener's other token (another agent on the same machine pool) has a rate of its own.
    const other = (await agent.t.api.post(`/v2/listeners/${agent.listenerId}/tokens`)).body.token as string;
    expect((await agent.appendRaw(other, ['from another token'])).status).toBe(204);
    expect((await agent.stored()).at(-1)).toBe('from another token');
  });

  it('the attack with the defaults: one token appending ~0.9 MB requests as fast as it can stores at most the revision cap (8 MiB), far under 64 MiB', async () => {
    const agent = await agentOnNewDeployment({});
    const line = 'y'.repeat(900);
    const statuses = new Map<number, number>();
    for (let i = 0; i < 30; i++) {
      const answer = await agent.appendRaw(
        agent.token,
        Array.from({ length: 1000 }, () => line),
      );
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      await answer.arrayBuffer();
    }
    expect(statuses.get(429) ?? 0).toBeGreaterThan(0);
    expect(await agent.storedBytes()).toBeLessThanOrEqual(8 * 1024 * 1024);
    expect((await agent.fail()).status).toBe(200);
  });
});
