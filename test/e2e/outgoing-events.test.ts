import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { dockerBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

type Received = { headers: IncomingHttpHeaders; body: string; answered: number };

/**
 * A receiver of outgoing events on loopback: records every request, and answers each with what
 * `answer` decides (a status, or `hold` to keep the request open until the sender goes away).
 */
async function startReceiver() {
  const received: Received[] = [];
  let answer: (request: Received, index: number) => number | 'hold' = () => 200;
  const held: ServerResponse[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: Received = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), answered: 0 };
      const decision = answer(request, received.length);
      received.push(request);
      if (decision === 'hold') {
        held.push(res);
        return;
      }
      request.answered = decision;
      res.writeHead(decision).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    /** The requests the receiver accepted (2xx), as the Standard Webhooks reference library verifies them. */
    accepted: () => received.filter((r) => r.answered >= 200 && r.answered < 300),
    answerWith(decide: (request: Received, index: number) => number | 'hold') {
      answer = decide;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of held) res.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
type Receiver = Awaited<ReturnType<typeof startReceiver>>;

const headersOf = (r: Received) => ({
  'webhook-id': String(r.headers['webhook-id']),
  'webhook-timestamp': String(r.headers['webhook-timestamp']),
  'webhook-signature': String(r.headers['webhook-signature']),
});

describe('outgoing events (contract §17)', () => {
  let server: ServerProcess;
  let api: Api;
  let receiver: Receiver;
  const processes: ServerProcess[] = [];

  beforeAll(async () => {
    receiver = await startReceiver();
    // The tests' receiver is on loopback: allowed by the setting, as an operator allows an internal receiver.
    server = await startServerProcess({ EVENTS_ALLOWED_HOSTS: '127.0.0.1', SANDBOX_STAGE_MS: '50' });
    processes.push(server);
    api = apiClient(server.url, server.apiKey);
  });
  afterAll(async () => {
    for (const p of processes) await p.kill('SIGKILL');
    await receiver.close();
  });

  it('signs each event as Standard Webhooks, retries a failing receiver and keeps the order per deployment', async () => {
    const fx = await workspaceFixtures(api);
    const created = await api.post('/v1/event-subscriptions', { url: receiver.url, events: ['*'] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ url: receiver.url, events: ['*'], format: 'standard' });
    const secret = created.body.secret as string;
    expect(secret).toMatch(/^whsec_/);
    const listed = await api.get('/v1/event-subscriptions');
    expect(listed.body.find((s: { id: string }) => s.id === created.body.id)).not.toHaveProperty('secret');

    // The receiver fails the first two requests; everything is still delivered, in order.
    receiver.answerWith((_request, index) => (index < 2 ? 500 : 200));
    const deployment = await api.post('/v2/deployments', dockerBody(uniqueName('ev'), fx.listenerId));
    expect(deployment.status).toBe(201);
    const deploymentId = deployment.body.id as string;
    const revisionId = deployment.body.latest_revision_id as string;
    await revisionReaches(api, deploymentId, revisionId, ['DEPLOYED']);

    const events = await eventually(async () => {
      const mine = receiver
        .accepted()
        .map((r) => ({ r, payload: JSON.parse(r.body) }))
        .filter(({ payload }) => payload.data.deployment_id === deploymentId);
      return mine.some(({ payload }) => payload.data.status === 'DEPLOYED') ? mine : undefined;
    }, 30_000);
    const verifier = new Webhook(secret);
    for (const { r } of events) expect(verifier.verify(r.body, headersOf(r))).toEqual(JSON.parse(r.body));
    // A forged body fails the same check.
    expect(() => verifier.verify(events[0]!.r.body.replace(deploymentId, 'x'), headersOf(events[0]!.r))).toThrow();

    // Order per deployment: the creation, then each status in the order the revision went through them.
    const types = events.map(({ payload }) => payload.type);
    expect(types[0]).toBe('deployment.created');
    expect(types.slice(1).every((t) => t === 'revision.status_changed')).toBe(true);
    expect(events.at(-1)!.payload.data.status).toBe('DEPLOYED');
    const ids = events.map(({ r }) => Number(String(r.headers['webhook-id']).split('_').at(-1)));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);

    // The deliveries show the attempts: the first failed twice (500) and went through on the third.
    const deliveries = await api.get(`/v1/event-subscriptions/${created.body.id}/deliveries`);
    expect(deliveries.status).toBe(200);
    const first = deliveries.body.find((d: { event: string; deployment_id: string }) => d.event === 'deployment.created' && d.deployment_id === deploymentId);
    expect(first.state).toBe('delivered');
    expect(first.attempts.map((a: { response_status: number }) => a.response_status)).toEqual([500, 500, 200]);

    // The audit log has the creation (from the audit middleware).
    const audit = await api.get(`/v1/audit-events?resource_id=${created.body.id}`);
    expect(audit.body.resources).toEqual([expect.objectContaining({ action: 'create', resource_type: 'event_subscription', outcome: 'succeeded' })]);
    expect(await api.delete(`/v1/event-subscriptions/${created.body.id}`)).toMatchObject({ status: 204 });
    const afterDelete = await api.get(`/v1/audit-events?resource_id=${created.body.id}`);
    expect(afterDelete.body.resources.map((e: { action: string }) => e.action)).toEqual(['delete', 'create']);
  });

  it('posts {text} to a slack subscription', async () => {
    receiver.answerWith(() => 200);
    const fx = await workspaceFixtures(api);
    const created = await api.post('/v1/event-subscriptions', { url: `${receiver.url}?slack`, events: ['deployment.created'], format: 'slack' });
    expect(created.status).toBe(201);
    const deployment = await api.post('/v2/deployments', dockerBody(uniqueName('slack'), fx.listenerId));
    const message = await eventually(async () => receiver.accepted().find((r) => r.body.includes(deployment.body.id) && !r.headers['webhook-id']));
    expect(JSON.parse(message.body)).toEqual({ text: `Deployment ${deployment.body.id} was created` });
    await api.delete(`/v1/event-subscriptions/${created.body.id}`);
  });

  it('another workspace neither sees nor deletes a subscription, nor gets its events', async () => {
    const mine = await api.post('/v1/event-subscriptions', { url: receiver.url, events: ['deployment.created'] });
    expect(mine.status).toBe(201);
    const workspace = await api.post('/v1/workspaces', { name: `ws-ev-${crypto.randomUUID().slice(0, 8)}` });
    expect(workspace.status).toBe(201);
    const key = await api.post('/v1/api-keys', { workspace_id: workspace.body.id, description: 'workspace B' });
    expect(key.status).toBe(201);
    const other = apiClient(server.url, key.body.key);
    expect((await other.get('/v1/event-subscriptions')).body).toEqual([]);
    expect((await other.delete(`/v1/event-subscriptions/${mine.body.id}`)).status).toBe(404);
    expect((await other.get(`/v1/event-subscriptions/${mine.body.id}/deliveries`)).status).toBe(404);
    // A deployment of the other workspace makes no delivery for this one's subscription.
    const otherFx = await workspaceFixtures(other);
    const theirs = await other.post('/v2/deployments', dockerBody(uniqueName('other'), otherFx.listenerId));
    expect(theirs.status).toBe(201);
    const ours = await api.post('/v2/deployments', dockerBody(uniqueName('ours'), (await workspaceFixtures(api)).listenerId));
    const deliveries = await eventually(async () => {
      const answer = await api.get(`/v1/event-subscriptions/${mine.body.id}/deliveries`);
      return answer.body.some((d: { deployment_id: string }) => d.deployment_id === ours.body.id) ? answer.body : undefined;
    });
    expect(deliveries.map((d: { deployment_id: string }) => d.deployment_id)).not.toContain(theirs.body.id);
    expect((await api.get('/v1/event-subscriptions')).body.map((s: { id: string }) => s.id)).toContain(mine.body.id);
    await api.delete(`/v1/event-subscriptions/${mine.body.id}`);
  });

  it('refuses bad input with 422 in the contract format and creates nothing', async () => {
    const before = (await api.get('/v1/event-subscriptions')).body.length;
    const bad: unknown[] = [
      {},
      { url: receiver.url },
      { url: receiver.url, events: [] },
      { url: receiver.url, events: ['deployment.renamed'] },
      { url: receiver.url, events: ['*'], format: 'teams' },
      { url: 'ftp://example.com/hook', events: ['*'] },
      { url: 'not a url', events: ['*'] },
      { url: receiver.url, events: ['*'], extra: 1 },
      // A private address is refused by configuration (EVENTS_ALLOWED_HOSTS lists only 127.0.0.1): nothing is sent there.
      { url: 'http://10.0.0.1/hook', events: ['*'] },
      { url: 'http://169.254.169.254/latest', events: ['*'] },
    ];
    for (const body of bad) {
      const answer = await api.post('/v1/event-subscriptions', body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(Array.isArray(answer.body.detail), JSON.stringify(answer.body)).toBe(true);
      expect(answer.body.detail[0]).toHaveProperty('msg');
    }
    expect((await api.post('/v1/event-subscriptions', '{"url": ', { 'content-type': 'application/json' })).status).toBe(422);
    expect((await api.delete('/v1/event-subscriptions/not-an-id')).status).toBeGreaterThanOrEqual(400);
    expect((await api.get('/v1/event-subscriptions')).body.length).toBe(before);
  });

  it('a delivery cut off by kill -9 arrives after the restart, with the same webhook-id', async () => {
    const fx = await workspaceFixtures(api);
    const created = await api.post('/v1/event-subscriptions', { url: receiver.url, events: ['deployment.created'] });
    // The receiver holds the first request open: the server is killed while the delivery is in flight.
    let inFlight: Received | undefined;
    receiver.answerWith((request) => {
      // The earlier tests' subscriptions are deleted (and their pending deliveries with them): the first request is this one's.
      if (!inFlight) {
        inFlight = request;
        return 'hold';
      }
      return 200;
    });
    const deployment = await api.post('/v2/deployments', dockerBody(uniqueName('kill'), fx.listenerId));
    expect(deployment.status).toBe(201);
    await eventually(async () => inFlight);
    expect(inFlight!.body).toContain(deployment.body.id);
    await server.kill('SIGKILL');
    server = await server.restart();
    processes.push(server);
    api = apiClient(server.url, server.apiKey);

    const delivered = await eventually(async () => receiver.accepted().find((r) => r.body.includes(deployment.body.id)), 30_000);
    expect(delivered.headers['webhook-id']).toBe(inFlight!.headers['webhook-id']);
    expect(new Webhook(created.body.secret).verify(delivered.body, headersOf(delivered))).toMatchObject({ type: 'deployment.created' });
  });
});
