import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { agentCall } from '../helpers/agent-call.ts';
import { testBackendKind, testDatabaseUrl } from '../helpers/backends.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * Revoking a listener token ends what the token is doing at once: a claim long-poll already
 * waiting with it answers 401 (never the work, and its secrets, of a deployment created after the
 * revoke), and the claims it holds go back to the queue for the listener's other agents without
 * waiting out their lease. On PostgreSQL also across two control planes on one database, as two
 * server processes are: the poll held by one, the revoke made through the other.
 */

type App = Awaited<ReturnType<typeof inProcessApp>>;
const opened: App[] = [];
afterEach(async () => {
  for (const app of opened.splice(0)) await app.close();
});

/** Long enough that a lapsed lease can never be what frees a claim in these tests. */
const LEASE = { AGENT_LEASE_MS: '120000' };

async function processesOnOneDatabase(count: number): Promise<App[]> {
  const url = await testDatabaseUrl(testBackendKind());
  const secretBox = new SecretBox(randomBytes(32));
  const apps: App[] = [];
  for (let i = 0; i < count; i++) {
    const app = await inProcessApp({ path: url, secretBox, processId: `process-${i}`, env: LEASE });
    opened.push(app);
    apps.push(app);
  }
  return apps;
}

async function listenerWithTokens(t: App) {
  const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: uniqueName('revoke-machine') });
  const token = async () => (await t.api.post(`/v2/listeners/${listener.body.id}/tokens`)).body as { id: string; token: string };
  return { listenerId: listener.body.id as string, doomed: await token(), kept: await token() };
}

const SECRET = 'secret-created-after-the-revoke';

describe(`revoking a listener token (${testBackendKind()})`, () => {
  it('ends a claim long-poll already waiting with it: 401, not the work of a deployment created after the revoke', async () => {
    const [t] = (await processesOnOneDatabase(1)) as [App];
    const { listenerId, doomed, kept } = await listenerWithTokens(t);
    const held = agentCall(t.app, listenerId, doomed.token, '/claim', { agent_id: 'doomed', wait_seconds: 30 });
    await new Promise((r) => setTimeout(r, 200));
    expect((await t.api.delete(`/v2/listeners/${listenerId}/tokens/${doomed.id}`)).status).toBe(204);
    const created = await t.api.post(
      '/v2/deployments',
      dockerBody(uniqueName('after-revoke'), listenerId, { secrets: [{ name: 'API_TOKEN', value: SECRET }] }),
    );
    expect(created.status).toBe(201);
    const answer = await held;
    expect(answer.status).toBe(401);
    expect(JSON.stringify(answer.body)).not.toContain(SECRET);
    const other = await agentCall(t.app, listenerId, kept.token, '/claim', { agent_id: 'kept', wait_seconds: 0 });
    expect(other.body.work?.deployment.id).toBe(created.body.id);
  });

  it('gives the claims the token holds back to the queue at once, for the listener’s other agents', async () => {
    const [t] = (await processesOnOneDatabase(1)) as [App];
    const { listenerId, doomed, kept } = await listenerWithTokens(t);
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('in-flight'), listenerId));
    const claimed = await agentCall(t.app, listenerId, doomed.token, '/claim', { agent_id: 'doomed', wait_seconds: 0 });
    expect(claimed.body.work.deployment.id).toBe(created.body.id);
    // Held: the other agent gets nothing while the claim's lease runs.
    expect((await agentCall(t.app, listenerId, kept.token, '/claim', { agent_id: 'kept', wait_seconds: 0 })).body.work).toBeNull();
    expect((await t.api.delete(`/v2/listeners/${listenerId}/tokens/${doomed.id}`)).status).toBe(204);
    const taken = await agentCall(t.app, listenerId, kept.token, '/claim', { agent_id: 'kept', wait_seconds: 0 });
    expect(taken.body.work?.deployment.id).toBe(created.body.id);
    expect(taken.body.work.claim_id).not.toBe(claimed.body.work.claim_id);
    expect((await agentCall(t.app, listenerId, doomed.token, `/claims/${claimed.body.work.claim_id}/renew`)).status).toBe(401);
  });

  it.runIf(testBackendKind() === 'postgres')('does both when the poll and the claim are held by another process than the one that revokes', async () => {
    const [holder, revoker] = (await processesOnOneDatabase(2)) as [App, App];
    const { listenerId, doomed, kept } = await listenerWithTokens(revoker);
    const inFlight = await revoker.api.post('/v2/deployments', dockerBody(uniqueName('held-elsewhere'), listenerId));
    const claimed = await agentCall(holder.app, listenerId, doomed.token, '/claim', { agent_id: 'doomed', wait_seconds: 0 });
    expect(claimed.body.work.deployment.id).toBe(inFlight.body.id);
    const held = agentCall(holder.app, listenerId, doomed.token, '/claim', { agent_id: 'doomed', wait_seconds: 30 });
    await new Promise((r) => setTimeout(r, 300));
    expect((await revoker.api.delete(`/v2/listeners/${listenerId}/tokens/${doomed.id}`)).status).toBe(204);
    const created = await revoker.api.post(
      '/v2/deployments',
      dockerBody(uniqueName('after-revoke'), listenerId, { secrets: [{ name: 'API_TOKEN', value: SECRET }] }),
    );
    expect(created.status).toBe(201);
    const answer = await held;
    expect(answer.status).toBe(401);
    expect(JSON.stringify(answer.body)).not.toContain(SECRET);
    // The in-flight claim went back: the kept token's agent takes both pieces of work now.
    const first = await agentCall(revoker.app, listenerId, kept.token, '/claim', { agent_id: 'kept', wait_seconds: 0 });
    const second = await agentCall(revoker.app, listenerId, kept.token, '/claim', { agent_id: 'kept', wait_seconds: 0 });
    expect([first.body.work?.deployment.id, second.body.work?.deployment.id].sort()).toEqual([inFlight.body.id, created.body.id].sort());
  });
});
