import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { type ControlPlane, createControlPlane } from '../../server/control-plane.ts';
import { hashApiKey } from '../../server/crypto/api-key.ts';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { systemClock } from '../../server/lib/clock.ts';
import { createLogger, type Logger, silentLogger } from '../../server/logger.ts';
import type { StoreBackend } from '../../server/store/backend.ts';
import { openStore } from '../../server/store/open.ts';
import { agentCall } from '../helpers/agent-call.ts';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { testDatabaseUrl } from '../helpers/backends.ts';
import { dockerBody, uniqueName } from '../helpers/fixtures.ts';
import { rawSql } from '../helpers/raw-sql.ts';

/**
 * Two whole control planes in this test process on ONE PostgreSQL database: each has its own
 * pool, its own listening connection and its own in-memory state (waiters, caches, teardowns),
 * as two server processes would. What one learns, the other must learn through the database.
 * (Three real server processes are tested by the cluster suite.)
 */

type Plane = { controlPlane: ControlPlane; backend: StoreBackend; api: Api; client: (key: string) => Api; close(): Promise<void> };

const secretBox = new SecretBox(randomBytes(32));
const apiKey = `test-${crypto.randomUUID()}`;
let url: string;
let _workspaceId: string;
let a: Plane;
let b: Plane;
let provider: Server;
let providerPort: number;
/** Refresh grants the provider has answered. */
let refreshes = 0;

async function plane(log: Logger = silentLogger, env: Record<string, string> = {}): Promise<Plane> {
  const backend = await openStore(url, { secretBox, log });
  const config = loadConfig({
    SANDBOX_STAGE_MS: '10',
    LOG_LEVEL: 'silent',
    DATABASE_URL: ':memory:',
    AGENT_LEASE_MS: '5000',
    OAUTH_ALLOWED_HOSTS: '127.0.0.1',
    ...env,
  });
  const controlPlane = createControlPlane({ backend, clock: systemClock, log, config, secretBox, publicUrl: () => 'http://localhost' });
  await controlPlane.start();
  const client = (key: string) => apiClient('', key, {}, (path, init) => controlPlane.app.request(path, init));
  return {
    controlPlane,
    backend,
    api: client(apiKey),
    client,
    close: async () => {
      controlPlane.stop();
      await backend.close();
    },
  };
}

beforeAll(async () => {
  url = await testDatabaseUrl('postgres');
  a = await plane();
  const boot = await a.backend.core.bootstrap({ keyHash: hashApiKey(apiKey), keyId: crypto.randomUUID(), now: systemClock.now() });
  _workspaceId = boot.workspaceId;
  b = await plane();
  // An OAuth provider's token endpoint, simulated on loopback: a token for any code (one that
  // expires in a second, with a refresh token, for a code starting "short"); refreshes are counted.
  provider = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      let answer: Record<string, unknown> = { access_token: `token-${crypto.randomUUID()}`, token_type: 'Bearer', expires_in: 3600 };
      if (form.get('grant_type') === 'refresh_token')
        answer = { access_token: `refreshed-${++refreshes}`, token_type: 'Bearer', expires_in: 3600, refresh_token: `rotated-${refreshes}` };
      else if (form.get('code')?.startsWith('short')) answer = { access_token: 'short-lived', token_type: 'Bearer', expires_in: 1, refresh_token: 'refresh-1' };
      // A refresh answers slowly, so that two processes refreshing at once would overlap here.
      setTimeout(
        () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(JSON.stringify(answer));
        },
        form.get('grant_type') === 'refresh_token' ? 300 : 0,
      );
    });
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  providerPort = (provider.address() as AddressInfo).port;
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await new Promise<void>((resolve) => provider?.close(() => resolve()));
});

/** An agent route called on one plane. */
function agentCallOn(on: Plane, listenerId: string, token: string, path: string, body?: unknown, method = 'POST') {
  return agentCall(on.controlPlane.app, listenerId, token, path, body, method);
}

/** A `local` or `k8s` listener (its revisions wait for an agent: nothing moves them under the test) and an agent token. */
async function listener(computeType: 'local' | 'k8s' = 'local') {
  const created = await a.api.post('/v2/listeners', {
    compute_type: computeType,
    compute_id: `m-${crypto.randomUUID().slice(0, 8)}`,
    // A k8s deployment needs a license key (contract §18): the listener names the Secret holding it.
    ...(computeType === 'k8s' ? { compute_config: { k8s_license_secret: 'langgraph-license' } } : {}),
  });
  expect(created.status).toBe(201);
  const token = await a.api.post(`/v2/listeners/${created.body.id}/tokens`);
  expect(token.status).toBe(201);
  return { id: created.body.id as string, token: token.body.token as string };
}

const revisionPath = (deploymentId: string, revisionId: string) => `/v2/deployments/${deploymentId}/revisions/${revisionId}`;

describe('two control planes on one PostgreSQL database', () => {
  it('a revision long-poll held on A answers when B interrupts it, and one on a PATCH-queued revision when B starts it', async () => {
    const k8s = await listener('k8s');
    const created = await b.api.post('/v2/deployments', dockerBody(uniqueName('lp'), k8s.id));
    expect(created.status).toBe(201);
    const deploymentId = created.body.id as string;
    const first = created.body.latest_revision_id as string;
    const patched = await b.api.patch(`/v2/deployments/${deploymentId}`, { source_revision_config: { image_uri: 'docker.io/acme/agent:2' } });
    expect(patched.status).toBe(200);
    const second = patched.body.latest_revision_id as string;
    expect(second).not.toBe(first);

    const firstNow = await a.api.get(revisionPath(deploymentId, first));
    const secondNow = await a.api.get(revisionPath(deploymentId, second));
    expect(secondNow.body.status).toBe('QUEUED');
    const started = Date.now();
    const heldFirst = a.api.get(revisionPath(deploymentId, first), { 'if-none-match': firstNow.headers.get('etag')!, prefer: 'wait=30' });
    const heldSecond = a.api.get(revisionPath(deploymentId, second), { 'if-none-match': secondNow.headers.get('etag')!, prefer: 'wait=30' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await b.api.post(`${revisionPath(deploymentId, first)}/interrupt`)).status).toBe(200);

    const [answerFirst, answerSecond] = await Promise.all([heldFirst, heldSecond]);
    // Far under the 30 s the polls would otherwise hold (the figure itself is measured in bench/).
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(answerFirst.status).toBe(200);
    expect(answerFirst.body.status).toBe('INTERRUPTED');
    expect(answerSecond.status).toBe(200);
    expect(answerSecond.body.status).toBe('AWAITING_DEPLOY');
  });

  it('wake-up across processes, 20 times: every long-poll on A answers the change made through B (latencies printed, not asserted)', async () => {
    const k8s = await listener('k8s');
    const latencies: number[] = [];
    const revokes: number[] = [];
    for (let i = 0; i < 20; i++) {
      const created = await b.api.post('/v2/deployments', dockerBody(uniqueName('wake'), k8s.id));
      const path = revisionPath(created.body.id, created.body.latest_revision_id);
      const now = await a.api.get(path);
      let answeredAt = 0;
      const held = a.api
        .get(path, { 'if-none-match': now.headers.get('etag')!, prefer: 'wait=30' })
        .then((answer) => ((answeredAt = performance.now()), answer));
      await new Promise((resolve) => setTimeout(resolve, 20));
      const sent = performance.now();
      expect((await b.api.post(`${path}/interrupt`)).status).toBe(200);
      // From the interrupt being sent to B until A's held poll answers.
      const answer = await held;
      expect(answer.body.status).toBe('INTERRUPTED');
      latencies.push(answeredAt - sent);
      // What the acknowledged revoke costs: the whole DELETE, with one other process listening.
      const key = await a.api.post('/v1/api-keys', { description: `cost-${i}` });
      const revokeStart = performance.now();
      expect((await a.api.delete(`/v1/api-keys/${key.body.id}`)).status).toBe(204);
      revokes.push(performance.now() - revokeStart);
    }
    const summary = (xs: number[]) => {
      const sorted = [...xs].sort((x, y) => x - y);
      return { median_ms: Math.round(sorted[Math.floor(sorted.length / 2)]! * 10) / 10, max_ms: Math.round(sorted.at(-1)! * 10) / 10 };
    };
    console.log(
      'cross-process wake-up (interrupt sent to B → long-poll on A answered):',
      summary(latencies),
      '; acknowledged revoke (DELETE /v1/api-keys/{id}):',
      summary(revokes),
    );
  });

  it('a revision long-poll held on A answers when B deletes the deployment (its revision is interrupted)', async () => {
    const k8s = await listener('k8s');
    const created = await a.api.post('/v2/deployments', dockerBody(uniqueName('del'), k8s.id));
    const path = revisionPath(created.body.id, created.body.latest_revision_id);
    const now = await a.api.get(path);
    const started = Date.now();
    const held = a.api.get(path, { 'if-none-match': now.headers.get('etag')!, prefer: 'wait=30' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await b.api.delete(`/v2/deployments/${created.body.id}?force=true`)).status).toBe(204);
    const answer = await held;
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(answer.body.status).toBe('INTERRUPTED');
  });

  it("an agent's claim long-poll on A is woken by work created through B", async () => {
    const local = await listener('local');
    const heardOnA: string[] = [];
    const stop = a.backend.coordination.subscribe('listener-work', (key) => heardOnA.push(key));
    try {
      const claim = agentCallOn(a, local.id, local.token, '/claim', { agent_id: 'agent-1', wait_seconds: 30 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const created = await b.api.post('/v2/deployments', dockerBody(uniqueName('claim'), local.id));
      expect(created.status).toBe(201);
      const answer = await claim;
      expect(answer.status).toBe(200);
      expect(answer.body.work).toMatchObject({ kind: 'revision', revision: { id: created.body.latest_revision_id } });
      // The wake-up came from B through the database (the claim also looks again every second on its own).
      expect(heardOnA).toContain(local.id);
    } finally {
      stop();
    }
  });

  it('a teardown waited for by A finishes when the agent reports it done to B, and when B forces it', async () => {
    const local = await listener('local');
    const created = await a.api.post('/v2/deployments', dockerBody(uniqueName('td'), local.id));
    // The agent takes the revision first (through B), so the teardown is the next work.
    const work = await agentCallOn(b, local.id, local.token, '/claim', { agent_id: 'agent-1', wait_seconds: 5 });
    expect(work.body.work.kind).toBe('revision');
    expect((await a.api.delete(`/v2/deployments/${created.body.id}`)).status).toBe(204);
    const teardown = await eventually(async () => {
      const claimed = await agentCallOn(b, local.id, local.token, '/claim', { agent_id: 'agent-1', wait_seconds: 1 });
      return claimed.body.work?.kind === 'teardown' ? claimed.body.work : undefined;
    }, 10_000);
    expect((await agentCallOn(b, local.id, local.token, `/claims/${teardown.claim_id}/done`)).status).toBe(204);
    // A's pipeline learns it and removes the deployment (it waits for an agent report forever otherwise).
    await eventually(async () => ((await b.api.get(`/v2/deployments/${created.body.id}`)).status === 404 ? true : undefined), 10_000);

    // A forced DELETE through B ends a teardown A waits for (no agent runs for this listener).
    const abandoned = await listener('local');
    const stuck = await a.api.post('/v2/deployments', dockerBody(uniqueName('force'), abandoned.id));
    expect((await a.api.delete(`/v2/deployments/${stuck.body.id}`)).status).toBe(204);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await a.api.get(`/v2/deployments/${stuck.body.id}`)).body.status).toBe('AWAITING_DELETE');
    expect((await b.api.delete(`/v2/deployments/${stuck.body.id}?force=true`)).status).toBe(204);
    await eventually(async () => ((await a.api.get(`/v2/deployments/${stuck.body.id}`)).status === 404 ? true : undefined), 10_000);
  });

  /** An OAuth provider whose endpoints are the test's local provider, created through A. */
  const createProvider = () =>
    a.api.post('/v2/auth/providers', {
      provider_id: `idp-${crypto.randomUUID().slice(0, 6)}`,
      name: 'IdP',
      client_id: 'client',
      client_secret: 'secret-0123456789',
      auth_url: `http://127.0.0.1:${providerPort}/authorize`,
      token_url: `http://127.0.0.1:${providerPort}/token`,
    });

  it('an OAuth wait held on A answers when the callback reaches B', async () => {
    const created = await createProvider();
    expect(created.status).toBe(200);
    const started = (await a.api.post('/v2/auth/authenticate', { provider: created.body.provider_id, scopes: ['read'], user_id: 'u1' })).body;
    const state = new URL(started.url).searchParams.get('state')!;
    const begun = Date.now();
    const held = a.api.get(`/v2/auth/wait/${started.auth_id}?timeout=30`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect((await b.controlPlane.app.request(`/v2/auth/callback?state=${state}&code=c1`)).status).toBe(200);
    const answer = await held;
    expect(Date.now() - begun).toBeLessThan(10_000);
    expect(answer.body).toMatchObject({ status: 'completed', token: expect.stringMatching(/^token-/) });
  });

  it("an OAuth wait on A is woken by B's callback whose notice arrives while A is still reading the flow", async () => {
    const created = await createProvider();
    const started = (await a.api.post('/v2/auth/authenticate', { provider: created.body.provider_id, scopes: ['read'], user_id: 'u-race' })).body;
    const state = new URL(started.url).searchParams.get('state')!;
    // A's first read of the flow returns it pending, but only after B has completed it and B's
    // notice has reached A: the order a slow read on A and a quick callback on B can take.
    const oauth = a.backend.oauth;
    const getFlow = oauth.getFlow.bind(oauth);
    let raced = false;
    oauth.getFlow = async (workspace, id) => {
      const flow = await getFlow(workspace, id);
      if (!raced && id === started.auth_id && flow?.status === 'pending') {
        raced = true;
        expect((await b.controlPlane.app.request(`/v2/auth/callback?state=${state}&code=c-race`)).status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      return flow;
    };
    try {
      const begun = Date.now();
      const answer = await a.api.get(`/v2/auth/wait/${started.auth_id}?timeout=8`);
      expect(raced).toBe(true);
      expect(answer.body).toMatchObject({ status: 'completed', token: expect.stringMatching(/^token-/) });
      // Woken by the notice, not by the deadline (a wait registered after the notice sleeps 8 s).
      expect(Date.now() - begun).toBeLessThan(5_000);
    } finally {
      delete (oauth as { getFlow?: unknown }).getFlow;
    }
  });

  it('a token that needs refreshing, asked for on A and B at once, is refreshed once at the provider', async () => {
    const created = await createProvider();
    const ask = (on: Plane) => on.api.post('/v2/auth/authenticate', { provider: created.body.provider_id, scopes: ['read'], user_id: 'u-refresh' });
    const started = (await ask(a)).body;
    const state = new URL(started.url).searchParams.get('state')!;
    expect((await a.controlPlane.app.request(`/v2/auth/callback?state=${state}&code=short-1`)).status).toBe(200);
    // Past half the token's one-second life, authenticate refreshes first.
    await new Promise((resolve) => setTimeout(resolve, 700));
    const before = refreshes;
    const answers = await Promise.all([ask(a), ask(b), ask(a), ask(b), ask(b), ask(a)]);
    for (const answer of answers) expect(answer.body).toMatchObject({ status: 'completed', token: expect.stringMatching(/^refreshed-/) });
    expect(refreshes - before).toBe(1);
    expect(new Set(answers.map((answer) => answer.body.token)).size).toBe(1);
  });

  it('a key revoked through A is refused by B on the very next request (20 times over)', async () => {
    for (let i = 0; i < 20; i++) {
      const key = await a.api.post('/v1/api-keys', { description: `k${i}` });
      expect(key.status).toBe(201);
      const asKey = { a: a.client(key.body.key), b: b.client(key.body.key) };
      // Both processes have the key cached (and its presented-key → hash entry).
      expect((await asKey.b.get('/v2/deployments')).status).toBe(200);
      expect((await asKey.a.get('/v2/deployments')).status).toBe(200);
      expect((await a.api.delete(`/v1/api-keys/${key.body.id}`)).status).toBe(204);
      const next = await asKey.b.get('/v2/deployments');
      expect(next.status, `round ${i}`).toBe(401);
      expect(next.body).toEqual({ detail: 'Invalid or revoked API key.' });
      expect((await asKey.a.get('/v2/deployments')).status).toBe(401);
    }
    // The bootstrap key is untouched on both.
    expect((await b.api.get('/v2/deployments')).status).toBe(200);
  });

  /** Revokes a key by a direct write to the database: no process is told. */
  async function revokeWithoutNotice(keyId: string): Promise<void> {
    const sql = rawSql(url, b.backend.core);
    try {
      await sql.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(systemClock.now(), keyId);
    } finally {
      await sql.close();
    }
  }

  it('B drops its key caches when its listening connection is lost (notices may have been missed)', async () => {
    const key = await a.api.post('/v1/api-keys', { description: 'resync' });
    expect((await b.client(key.body.key).get('/v2/deployments')).status).toBe(200);
    // Revoked behind every process's back (a direct write no notice announces), then B's connection is cut.
    await revokeWithoutNotice(key.body.id);
    // Still cached on B: no notice was sent.
    expect((await b.client(key.body.key).get('/v2/deployments')).status).toBe(200);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [
        `control-plane:${(b.backend.coordination as unknown as { processId: string }).processId}`,
      ]);
    } finally {
      await admin.end();
    }
    await eventually(async () => ((await b.client(key.body.key).get('/v2/deployments')).status === 401 ? true : undefined), 10_000);
  });

  it('while B cannot hear the others, B caches no key: a revoke it cannot hear of still holds on its next request', async () => {
    const auth = b.controlPlane.services.auth;
    const coordination = b.backend.coordination;
    // Simulated: B's listening connection reported down (a real cut reconnects within ~100 ms, too
    // short to act in); what is under test is what Auth does meanwhile.
    auth.sharedWith({ announceRevoked: (id) => coordination.publishAcknowledged('api-key-revoked', id), listening: () => false });
    try {
      const key = await a.api.post('/v1/api-keys', { description: 'deaf' });
      expect((await b.client(key.body.key).get('/v2/deployments')).status).toBe(200);
      // Revoked with no notice at all (a direct write): only a database read finds it.
      await revokeWithoutNotice(key.body.id);
      expect((await b.client(key.body.key).get('/v2/deployments')).status).toBe(401);
    } finally {
      auth.sharedWith({ announceRevoked: (id) => coordination.publishAcknowledged('api-key-revoked', id), listening: () => coordination.listening });
    }
  });
});

describe('the reconciler on two control planes', () => {
  it('runs in one process at a time; when the leader goes, the other takes over', async () => {
    const lines: Array<{ who: string; msg: string }> = [];
    const logOf = (who: string) => createLogger('info', (line) => lines.push({ who, msg: JSON.parse(line).msg }));
    const leads = (who: string) => lines.filter((l) => l.who === who && l.msg === 'reconciler: this process runs the reconciler passes now').length;
    const env = { RECONCILE_INTERVAL_MS: '50' };
    const first = await plane(logOf('first'), env);
    const second = await plane(logOf('second'), env);
    const open = new Set([first, second]);
    try {
      // a and b (interval 0 there: no reconciler) are not candidates; of these two, exactly one leads.
      await eventually(async () => (leads('first') + leads('second') === 1 ? true : undefined), 10_000);
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(leads('first') + leads('second')).toBe(1);
      const [leader, standbyName] = leads('first') === 1 ? [first, 'second'] : [second, 'first'];
      expect(lines.some((l) => l.who === standbyName && l.msg === 'reconciler: another process runs the reconciler passes; this one stands by')).toBe(true);
      // The leader's process ends (its listening connection, and the lock with it, goes).
      open.delete(leader);
      await leader.close();
      await eventually(async () => (leads(standbyName) === 1 ? true : undefined), 10_000);
    } finally {
      await Promise.all([...open].map((p) => p.close()));
    }
  });
});
