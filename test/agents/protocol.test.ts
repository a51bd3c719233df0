import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SANDBOX_AGENT_MODULES } from '../../agent/sandbox.ts';
import { agentCall } from '../helpers/agent-call.ts';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { testBackendKind } from '../helpers/backends.ts';
import { dockerBody, githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { movableClock } from '../helpers/movable-clock.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { type AgentProcess, graphRepo, killLeftoverServers, localListener, processesIn, runGraph, serverPidOf, startAgent } from './harness.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** The agents' lease here; the silent-listener sweep runs every half lease (of wall time). */
const LEASE_MS = 400;

describe('the listener-agent protocol (in process)', () => {
  let t: App;
  let a: { listenerId: string; token: string };
  let b: { listenerId: string; token: string };
  // The server's clock stands still but for the test's moves: a claim lapses, and a listener
  // falls silent, when a case moves it past a lease, never because the machine was slow to
  // make the next call (a READY read 400 ms of wall time after the agent's last call was UNKNOWN).
  const clock = movableClock({ standing: true });
  /** Silent-listener sweeps finished, counted to wait for "several sweeps" by their number, not by a sleep. */
  let sweeps = 0;
  beforeAll(async () => {
    t = await inProcessApp({ clock, env: { AGENT_LEASE_MS: String(LEASE_MS) } });
    const markSilent = t.backend.agents.markSilent.bind(t.backend.agents);
    t.backend.agents.markSilent = async (cutoff, now) => {
      try {
        return await markSilent(cutoff, now);
      } finally {
        sweeps++;
      }
    };
    const create = async (computeId: string) => {
      const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: computeId });
      const token = await t.api.post(`/v2/listeners/${listener.body.id}/tokens`);
      expect(token.status).toBe(201);
      expect(Object.keys(token.body).sort()).toEqual(['created_at', 'id', 'listener_id', 'token']);
      return { listenerId: listener.body.id as string, token: token.body.token as string };
    };
    a = await create('machine-a');
    b = await create('machine-b');
  });
  afterAll(() => t.close());

  const deployOn = async (listenerId: string, secret: string) => {
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('agent'), listenerId, { secrets: [{ name: 'API_TOKEN', value: secret }] }));
    expect(created.status).toBe(201);
    return created.body as { id: string; latest_revision_id: string };
  };

  it('keeps tokens hashed at rest and accepts them only on their own listener’s agent routes', async () => {
    const rows = (await t.sql.prepare('SELECT * FROM listener_tokens').all()) as Array<Record<string, unknown>>;
    expect(rows.length).toBe(2);
    for (const row of rows) expect(JSON.stringify(row)).not.toContain(a.token.slice(4));
    // A's token: not on B's agent routes, not on any API route.
    expect((await agentCall(t.app, b.listenerId, a.token, '/claim', { agent_id: 'x', wait_seconds: 0 })).status).toBe(404);
    expect((await agentCall(t.app, b.listenerId, a.token, '/live', undefined, 'GET')).status).toBe(404);
    const asApiKey = t.client(a.token);
    expect((await asApiKey.get('/v2/deployments')).status).toBe(401);
    expect((await asApiKey.get(`/v2/listeners/${a.listenerId}`)).status).toBe(401);
    expect((await asApiKey.post(`/v2/listeners/${a.listenerId}/tokens`)).status).toBe(401);
    // An API key is not an agent credential, nor is nothing.
    expect((await agentCall(t.app, a.listenerId, t.apiKey, '/claim', { agent_id: 'x', wait_seconds: 0 })).status).toBe(401);
    expect((await agentCall(t.app, a.listenerId, null, '/claim', { agent_id: 'x', wait_seconds: 0 })).status).toBe(401);
    // Bad input: 422, nothing changes.
    expect((await agentCall(t.app, a.listenerId, a.token, '/heartbeat', { agent_id: 'x', version: 'v', capacity: -1 })).status).toBe(422);
    expect((await t.api.get(`/v2/listeners/${a.listenerId}`)).body.agent_version).toBeNull();
  });

  it('gives a listener only its own work, with its secrets inside the claim; another listener’s claim id is not held', async () => {
    const onB = await deployOn(b.listenerId, 'secret-of-b');
    const nothing = await agentCall(t.app, a.listenerId, a.token, '/claim', { agent_id: 'a1', wait_seconds: 0 });
    expect(nothing).toEqual({ status: 200, body: { work: null } });
    const live = await agentCall(t.app, a.listenerId, a.token, '/live', undefined, 'GET');
    expect(JSON.stringify(live.body)).not.toContain('secret-of-b');
    const claimed = await agentCall(t.app, b.listenerId, b.token, '/claim', { agent_id: 'b1', wait_seconds: 0 });
    expect(claimed.body.work).toMatchObject({
      kind: 'revision',
      deployment: { id: onB.id },
      revision: { id: onB.latest_revision_id, status: 'AWAITING_DEPLOY', secrets: [{ name: 'API_TOKEN', value: 'secret-of-b' }] },
    });
    const claimId = claimed.body.work.claim_id as string;
    // A's token cannot touch B's claim through its own listener's path.
    for (const [path, body] of [
      ['/renew', undefined],
      ['/transition', { from: 'AWAITING_DEPLOY', to: 'DEPLOYING' }],
      ['/logs', { lines: [{ type: 'deploy', message: 'x' }] }],
    ] as const) {
      expect((await agentCall(t.app, a.listenerId, a.token, `/claims/${claimId}${path}`, body)).status).toBe(409);
    }
    expect((await t.api.get(`/v2/deployments/${onB.id}/revisions/${onB.latest_revision_id}`)).body.status).toBe('AWAITING_DEPLOY');
    // A's API key view never carries secrets.
    expect(JSON.stringify((await t.api.get(`/v2/deployments/${onB.id}`)).body)).not.toContain('secret-of-b');
  });

  it('answers a held claim when work arrives, not at the end of its wait', async () => {
    const started = Date.now();
    const held = agentCall(t.app, a.listenerId, a.token, '/claim', { agent_id: 'a1', wait_seconds: 30 });
    await new Promise((r) => setTimeout(r, 100));
    const created = await deployOn(a.listenerId, 'secret-of-a');
    const answer = await held;
    expect(answer.body.work.revision.id).toBe(created.latest_revision_id);
    // Ratio, not a timing: the answer came long before the 30 s wait was over.
    expect(Date.now() - started).toBeLessThan(15_000);
    await agentCall(t.app, a.listenerId, a.token, `/claims/${answer.body.work.claim_id}`, undefined, 'DELETE');
  });

  it('returns a lapsed claim to the queue: a second agent takes it and the first learns it lost it', async () => {
    const created = await deployOn(a.listenerId, 's');
    let first: any;
    // Older work of this listener may be queued ahead; take claims until this deployment's comes.
    for (;;) {
      first = (await agentCall(t.app, a.listenerId, a.token, '/claim', { agent_id: 'a1', wait_seconds: 1 })).body.work;
      if (first.deployment.id === created.id) break;
      await agentCall(t.app, a.listenerId, a.token, `/claims/${first.claim_id}/transition`, {
        from: first.revision.status,
        to: 'DEPLOY_FAILED',
        status_message: 'not this test',
      });
    }
    expect((await agentCall(t.app, a.listenerId, a.token, `/claims/${first.claim_id}/transition`, { from: 'AWAITING_DEPLOY', to: 'DEPLOYING' })).status).toBe(
      200,
    );
    clock.advance(LEASE_MS + 1);
    const second = await eventually(async () => {
      const work = (await agentCall(t.app, a.listenerId, a.token, '/claim', { agent_id: 'a2', wait_seconds: 0 })).body.work;
      return work?.deployment.id === created.id ? work : undefined;
    }, 5000);
    expect(second.claim_id).not.toBe(first.claim_id);
    expect(second.revision.status).toBe('DEPLOYING');
    expect((await agentCall(t.app, a.listenerId, a.token, `/claims/${first.claim_id}/renew`)).status).toBe(409);
    expect((await agentCall(t.app, a.listenerId, a.token, `/claims/${first.claim_id}/transition`, { from: 'DEPLOYING', to: 'DEPLOYED' })).status).toBe(409);
    // An agent may not skip the pipeline's rules.
    expect((await agentCall(t.app, a.listenerId, a.token, `/claims/${second.claim_id}/transition`, { from: 'DEPLOYING', to: 'SKIPPED' })).status).toBe(400);
    const done = await agentCall(t.app, a.listenerId, a.token, `/claims/${second.claim_id}/transition`, { from: 'DEPLOYING', to: 'DEPLOYED' });
    expect(done.body.status).toBe('DEPLOYED');
  });

  it('lets an interrupt win: the agent’s next call is a 409 naming the status', async () => {
    const created = await deployOn(a.listenerId, 's');
    const work = await eventually(async () => {
      const w = (await agentCall(t.app, a.listenerId, a.token, '/claim', { agent_id: 'a1', wait_seconds: 0 })).body.work;
      return w?.deployment.id === created.id ? w : undefined;
    }, 5000);
    expect((await t.api.post(`/v2/deployments/${created.id}/revisions/${created.latest_revision_id}/interrupt`)).status).toBe(200);
    const moved = await agentCall(t.app, a.listenerId, a.token, `/claims/${work.claim_id}/transition`, { from: 'AWAITING_DEPLOY', to: 'DEPLOYING' });
    expect(moved.status).toBe(409);
    expect(moved.body.detail).toContain('INTERRUPTED');
    expect((await t.api.get(`/v2/deployments/${created.id}/revisions/${created.latest_revision_id}`)).body.status).toBe('INTERRUPTED');
  });

  it('writes the built commit only when the compare-and-set wins: an interrupt just after the status check leaves repo_commit_sha untouched', async () => {
    const created = await deployOn(a.listenerId, 's');
    const work = await eventually(async () => {
      const w = (await agentCall(t.app, a.listenerId, a.token, '/claim', { agent_id: 'a1', wait_seconds: 0 })).body.work;
      return w?.deployment.id === created.id ? w : undefined;
    }, 5000);
    // Simulated race: the interrupt is written right after the protocol has read the status (the
    // window between its check and the pipeline's compare-and-set), through the real store.
    const store = t.store as unknown as { getRevisionById(id: string): Promise<{ status: string } | null> };
    const read = store.getRevisionById.bind(store);
    let raced = false;
    store.getRevisionById = async (id: string) => {
      const revision = await read(id);
      if (!raced && id === created.latest_revision_id) {
        raced = true;
        await t.store.transitionRevision({ revisionId: id, from: ['AWAITING_DEPLOY'], to: 'INTERRUPTED' }, new Date().toISOString());
      }
      return revision;
    };
    try {
      const sha = 'a'.repeat(40);
      const moved = await agentCall(t.app, a.listenerId, a.token, `/claims/${work.claim_id}/transition`, {
        from: 'AWAITING_DEPLOY',
        to: 'DEPLOYING',
        repo_commit_sha: sha,
      });
      expect(raced).toBe(true);
      expect(moved.status).toBe(409);
    } finally {
      delete (store as { getRevisionById?: unknown }).getRevisionById;
    }
    const revision = (await t.api.get(`/v2/deployments/${created.id}/revisions/${created.latest_revision_id}`)).body;
    expect(revision.status).toBe('INTERRUPTED');
    expect(revision.source_revision_config.repo_commit_sha ?? null).toBeNull();
    expect((await t.api.get(`/v2/deployments/${created.id}`)).body.source_revision_config.repo_commit_sha ?? null).toBeNull();
  });

  it('records the built commit with a move that wins', async () => {
    const created = await deployOn(a.listenerId, 's');
    const work = await eventually(async () => {
      const w = (await agentCall(t.app, a.listenerId, a.token, '/claim', { agent_id: 'a1', wait_seconds: 0 })).body.work;
      return w?.deployment.id === created.id ? w : undefined;
    }, 5000);
    const sha = 'b'.repeat(40);
    const moved = await agentCall(t.app, a.listenerId, a.token, `/claims/${work.claim_id}/transition`, {
      from: 'AWAITING_DEPLOY',
      to: 'DEPLOYING',
      repo_commit_sha: sha,
    });
    expect(moved.status).toBe(200);
    expect(moved.body.source_revision_config.repo_commit_sha).toBe(sha);
    expect((await t.api.get(`/v2/deployments/${created.id}/revisions/${created.latest_revision_id}`)).body.source_revision_config.repo_commit_sha).toBe(sha);
    await agentCall(t.app, a.listenerId, a.token, `/claims/${work.claim_id}/transition`, {
      from: 'DEPLOYING',
      to: 'DEPLOY_FAILED',
      status_message: 'done with this test',
    });
  });

  it('fails a live revision only DEPLOYED → DEPLOY_FAILED with its cause, never one its deployment no longer serves, never another listener’s', async () => {
    const created = await deployOn(a.listenerId, 's');
    const deployRevision = async (revisionId: string) => {
      const work = await eventually(async () => {
        const w = (await agentCall(t.app, a.listenerId, a.token, '/claim', { agent_id: 'a1', wait_seconds: 0 })).body.work;
        return w?.revision?.id === revisionId ? w : undefined;
      }, 5000);
      for (const [from, to] of [
        ['AWAITING_DEPLOY', 'DEPLOYING'],
        ['DEPLOYING', 'DEPLOYED'],
      ])
        expect((await agentCall(t.app, a.listenerId, a.token, `/claims/${work.claim_id}/transition`, { from, to })).status).toBe(200);
    };
    await deployRevision(created.latest_revision_id);
    const first = created.latest_revision_id;
    const fail = (revisionId: string, body: unknown, as = a) => agentCall(t.app, as.listenerId, as.token, `/revisions/${revisionId}/transition`, body);
    const revisionOf = async (id: string) => (await t.api.get(`/v2/deployments/${created.id}/revisions/${id}`)).body;
    // Every other move after DEPLOYED, and a failure that does not say why: 400, nothing changes.
    for (const body of [
      { from: 'DEPLOYED', to: 'DEPLOYING', status_message: 'x' },
      { from: 'DEPLOYED', to: 'BUILD_FAILED', status_message: 'x' },
      { from: 'DEPLOYING', to: 'DEPLOY_FAILED', status_message: 'x' },
      { from: 'DEPLOYED', to: 'DEPLOY_FAILED' },
      { from: 'DEPLOYED', to: 'DEPLOY_FAILED', status_message: '  ' },
    ])
      expect((await fail(first, body)).status, JSON.stringify(body)).toBe(400);
    // Another listener's token, on its own listener's path: not its revision.
    expect((await fail(first, { from: 'DEPLOYED', to: 'DEPLOY_FAILED', status_message: 'x' }, b)).status).toBe(404);
    expect((await revisionOf(first)).status).toBe('DEPLOYED');
    // A newer revision deployed: the first is superseded, and a stale agent cannot fail it.
    const patched = await t.api.patch(`/v2/deployments/${created.id}`, { secrets: [{ name: 'API_TOKEN', value: 's2' }] });
    expect(patched.status).toBe(200);
    const second = (await t.api.get(`/v2/deployments/${created.id}`)).body.latest_revision_id as string;
    expect(second).not.toBe(first);
    await deployRevision(second);
    const stale = await fail(first, { from: 'DEPLOYED', to: 'DEPLOY_FAILED', status_message: 'stale' });
    expect(stale.status).toBe(409);
    expect(stale.body.detail).toContain(second);
    expect((await revisionOf(first)).status).toBe('DEPLOYED');
    // The live one fails, with its cause as the status message and an error line of its deploy log.
    const cause = 'its agent server exited 4 times in 10 minutes';
    const failed = await fail(second, { from: 'DEPLOYED', to: 'DEPLOY_FAILED', status_message: cause });
    expect(failed.status).toBe(200);
    expect(failed.body).toMatchObject({ id: second, status: 'DEPLOY_FAILED', status_message: cause });
    const log = (await t.api.get(`/v2/deployments/${created.id}/revisions/${second}/logs?type=deploy`)).body.logs as Array<{ level: string; message: string }>;
    expect(log.at(-1)).toMatchObject({ level: 'error', message: cause });
    // Once: a second report is 409; a restarted agent is not given the failed revision to serve.
    expect((await fail(second, { from: 'DEPLOYED', to: 'DEPLOY_FAILED', status_message: cause })).status).toBe(409);
    const live = (await agentCall(t.app, a.listenerId, a.token, '/live', undefined, 'GET')).body.deployments as Array<{ deployment: { id: string } }>;
    expect(live.some((l) => l.deployment.id === created.id)).toBe(false);
  });

  it('shows last_seen_at and the agent version; a silent listener’s deployments are UNKNOWN until it is heard again', async () => {
    const beat = await agentCall(t.app, b.listenerId, b.token, '/heartbeat', { agent_id: 'b1', version: 'local-agent/9.9.9', capacity: 3 });
    expect(beat.status).toBe(200);
    const listener = (await t.api.get(`/v2/listeners/${b.listenerId}`)).body;
    expect(listener).toMatchObject({ agent_version: 'local-agent/9.9.9', agent_capacity: 3, last_seen_at: beat.body.heard_at });
    const created = await deployOn(b.listenerId, 's');
    let work: any;
    do {
      work = (await agentCall(t.app, b.listenerId, b.token, '/claim', { agent_id: 'b1', wait_seconds: 1 })).body.work;
      for (const step of [
        ['AWAITING_DEPLOY', 'DEPLOYING'],
        ['DEPLOYING', 'DEPLOYED'],
      ] as const) {
        await agentCall(t.app, b.listenerId, b.token, `/claims/${work.claim_id}/transition`, { from: step[0], to: step[1] });
      }
    } while (work.deployment.id !== created.id);
    expect((await t.api.get(`/v2/deployments/${created.id}`)).body.status).toBe('READY');
    clock.advance(LEASE_MS + 1);
    await eventually(async () => ((await t.api.get(`/v2/deployments/${created.id}`)).body.status === 'UNKNOWN' ? true : undefined), 5000);
    await agentCall(t.app, b.listenerId, b.token, '/heartbeat', { agent_id: 'b1', version: 'local-agent/9.9.9', capacity: 3 });
    expect((await t.api.get(`/v2/deployments/${created.id}`)).body.status).toBe('READY');
  });

  it('revokes a token from the next request; the workspace default listener must be one of its own', async () => {
    const tokens = await t.api.get(`/v2/listeners/${a.listenerId}/tokens`);
    expect(tokens.body.length).toBe(1);
    expect(JSON.stringify(tokens.body)).not.toContain(a.token);
    expect((await t.api.delete(`/v2/listeners/${a.listenerId}/tokens/${tokens.body[0].id}`)).status).toBe(204);
    expect((await agentCall(t.app, a.listenerId, a.token, '/heartbeat', { agent_id: 'a1', version: 'v', capacity: 1 })).status).toBe(401);
    expect((await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { default_listener_id: crypto.randomUUID() })).status).toBe(400);
    expect((await t.api.patch(`/v1/workspaces/${crypto.randomUUID()}`, { default_listener_id: null })).status).toBe(404);
    // Contract §5: the sandbox listener is the default until changed; null sets it back.
    const sandbox = (await t.api.get('/v2/listeners?limit=100')).body.resources.find((l: any) => l.compute_type === 'sandbox');
    expect((await t.api.get('/v1/workspaces')).body[0].default_listener_id).toBe(sandbox.id);
    const set = await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { default_listener_id: b.listenerId });
    expect(set.body.default_listener_id).toBe(b.listenerId);
    expect((await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { default_listener_id: null })).body.default_listener_id).toBe(sandbox.id);
    const created = await t.api.post('/v1/workspaces', { name: `ws-${crypto.randomUUID().slice(0, 8)}` });
    const other = (await t.api.get('/v1/workspaces')).body.find((w: any) => w.id === created.body.id);
    expect(other.default_listener_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  /** A local listener of its own, with no agent ever running for it. */
  const abandonedListener = async () => {
    const listener = await t.api.post('/v2/listeners', { compute_type: 'local', compute_id: `gone-${crypto.randomUUID().slice(0, 8)}` });
    expect(listener.status).toBe(201);
    return listener.body.id as string;
  };
  const stillDeleting = async (id: string) => {
    // A lease passes, then three sweeps (every half lease of wall time): nothing finishes it on its own.
    clock.advance(LEASE_MS + 1);
    const after = sweeps + 3;
    await eventually(async () => (sweeps >= after ? true : undefined), 15_000, 20);
    const current = await t.api.get(`/v2/deployments/${id}`);
    expect(current.status).toBe(200);
    expect(current.body.status).toBe('AWAITING_DELETE');
  };

  it('a teardown no agent ever claims: a repeated DELETE waits on, a repeated DELETE ?force=true removes the deployment', async () => {
    const listenerId = await abandonedListener();
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('gone'), listenerId));
    expect(created.status).toBe(201);
    expect((await t.api.delete(`/v2/deployments/${created.body.id}`)).status).toBe(204);
    await stillDeleting(created.body.id);
    expect((await t.api.delete(`/v2/deployments/${created.body.id}`)).status).toBe(204);
    await stillDeleting(created.body.id);
    // Bad input is refused and changes nothing.
    expect((await t.api.delete(`/v2/deployments/${created.body.id}?force=yes`)).status).toBe(422);
    await stillDeleting(created.body.id);
    expect((await t.api.delete(`/v2/deployments/${created.body.id}?force=true`)).status).toBe(204);
    await eventually(async () => ((await t.api.get(`/v2/deployments/${created.body.id}`)).status === 404 ? true : undefined), 5000);
    // An unknown id: 404, as on every deployment route.
    expect((await t.api.delete(`/v2/deployments/${crypto.randomUUID()}?force=true`)).status).toBe(404);
  });

  it('a first DELETE ?force=true still offers the teardown to the listener’s agents', async () => {
    const listenerId = await abandonedListener();
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName('first-force'), listenerId));
    expect((await t.api.delete(`/v2/deployments/${created.body.id}?force=true`)).status).toBe(204);
    await stillDeleting(created.body.id);
    expect((await t.api.delete(`/v2/deployments/${created.body.id}?force=true`)).status).toBe(204);
    await eventually(async () => ((await t.api.get(`/v2/deployments/${created.body.id}`)).status === 404 ? true : undefined), 5000);
  });

  it('hands a waiting teardown back when no agent listener serves the deployment any more (the workspace default set back to the sandbox)', async () => {
    const listenerId = await abandonedListener();
    expect((await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { default_listener_id: listenerId })).status).toBe(200);
    try {
      const created = await t.api.post('/v2/deployments', { name: uniqueName('default'), source: 'internal_source' });
      expect(created.status).toBe(201);
      expect((await t.api.delete(`/v2/deployments/${created.body.id}`)).status).toBe(204);
      await stillDeleting(created.body.id);
      expect((await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { default_listener_id: null })).status).toBe(200);
      await eventually(async () => ((await t.api.get(`/v2/deployments/${created.body.id}`)).status === 404 ? true : undefined), 5000);
    } finally {
      await t.api.patch(`/v1/workspaces/${t.workspaceId}`, { default_listener_id: null });
    }
  });
});

/**
 * Faults with the real processes: the server, `local` agents (node agent/main.ts), a real git
 * repository and the LangGraph JS server. The builds use an install_command that links the
 * agent's own node_modules as the sandbox shows it (it has the graph's packages), so no test
 * waits for npm.
 *
 * On SQLite only: what these cases add to the in-process ones above is the agent's side (a
 * SIGKILL or SIGSTOP mid-build, its processes ended, its refusals), the same on either database;
 * the server's side of it (a lapsed claim back in the queue and taken by another agent, a silent
 * listener's deployments UNKNOWN, teardowns, interrupts) runs above on both backends. Run twice,
 * the block was 35–90 s of the suite's time.
 */
describe.skipIf(testBackendKind() !== 'sqlite')('the listener-agent protocol under faults (real processes)', () => {
  let server: ServerProcess;
  let api: Api;
  let listener: { listenerId: string; token: string };
  let integrationId: string;
  const agents: AgentProcess[] = [];
  const workDir = mkdtempSync(join(tmpdir(), 'cp-agent-faults-'));
  const repo = graphRepo();
  const linkModules = `ln -s ${SANDBOX_AGENT_MODULES} node_modules`;

  beforeAll(async () => {
    server = await startServerProcess({ ALLOW_FILE_REPO_URLS: 'true', RECONCILE_INTERVAL_MS: '0', AGENT_LEASE_MS: '1500' });
    api = apiClient(server.url, server.apiKey);
    const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
    integrationId = (await workspaceFixtures(api)).integrationId;
    listener = await localListener(api, workspaceId);
  });
  afterAll(async () => {
    for (const agent of agents) await agent.stop('SIGTERM');
    await server?.kill('SIGTERM');
    killLeftoverServers(workDir);
  });

  const agent = async (name: string) => {
    const started = await startAgent({ url: server.url, token: listener.token, listenerId: listener.listenerId, workDir, agentId: name });
    agents.push(started);
    return started;
  };
  const deploy = async (installCommand: string, graphConfigPath = 'langgraph.json') => {
    const created = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('fault'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: repo.url, deployment_type: 'dev', build_on_push: false, install_command: installCommand },
        source_revision_config: { repo_ref: 'main', graph_config_path: graphConfigPath },
      }),
    );
    expect(created.status).toBe(201);
    return created.body as { id: string; name: string; latest_revision_id: string; source_config: { custom_url: string } };
  };
  const buildLog = async (d: { id: string; latest_revision_id: string }) =>
    ((await api.get(`/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/logs?type=build&limit=1000`)).body.logs as Array<{ message: string }>).map(
      (l) => l.message,
    );

  it('an agent SIGKILLed mid-build: its lease lapses and a second agent finishes; silent past its lease the deployment is UNKNOWN, READY when an agent is back', {
    timeout: 240_000,
  }, async () => {
    const first = await agent('agent-one');
    const d = await deploy(`${linkModules} && echo installing slowly && sleep 4`);
    await eventually(async () => ((await buildLog(d)).includes('installing slowly') ? true : undefined), 60_000);
    await first.stop('SIGKILL');
    const second = await agent('agent-two');
    const revision = await revisionReaches(api, d.id, d.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 120_000);
    expect(revision.status, `${revision.status_message}\n${second.output()}`).toBe('DEPLOYED');
    expect(revision.source_revision_config.repo_commit_sha).toBe(repo.first);
    const log = await buildLog(d);
    expect(log.some((m) => m.startsWith('local agent agent-one: fetching'))).toBe(true);
    expect(log.some((m) => m.startsWith('local agent agent-two: fetching'))).toBe(true);
    const host = d.source_config.custom_url;
    expect((await runGraph(second.proxyPort, host)).body.answer).toBe('the first answer');

    // Offline past its lease: UNKNOWN. A new agent on the same machine: READY, served again from the build directory.
    await second.stop('SIGKILL');
    await eventually(async () => ((await api.get(`/v2/deployments/${d.id}`)).body.status === 'UNKNOWN' ? true : undefined), 20_000);
    const third = await agent('agent-three');
    expect((await api.get(`/v2/deployments/${d.id}`)).body.status).toBe('READY');
    // The server the killed agent left serving is taken over, not restarted.
    expect(third.output()).toContain(`of revision ${d.latest_revision_id} that the previous agent left serving`);
    // Once DEPLOYED the custom_url is the one the agent's URL template gives (it answers on the proxy).
    const current = (await api.get(`/v2/deployments/${d.id}`)).body.source_config.custom_url;
    expect(current).toBe(`http://127.0.0.1:${third.proxyPort}/d/${d.name}`);
    const afterTakeOver = await runGraph(third.proxyPort, current);
    expect(afterTakeOver.body.answer, `${JSON.stringify(afterTakeOver)}\n${third.output()}`).toBe('the first answer');
    expect((await buildLog(d)).filter((m) => m.includes(': fetching')).length).toBe(2);

    // Teardown: the agent stops the server and removes the work directory; then the deployment is gone.
    const serverPid = serverPidOf(join(workDir, d.id, d.latest_revision_id));
    expect((await api.delete(`/v2/deployments/${d.id}`)).status).toBe(204);
    await eventually(async () => ((await api.get(`/v2/deployments/${d.id}`)).status === 404 ? true : undefined), 30_000);
    expect(existsSync(join(workDir, d.id))).toBe(false);
    expect(() => process.kill(-serverPid, 0)).toThrow();
    expect((await runGraph(third.proxyPort, current)).status).toBe(404);
  });

  it('a claim that lapsed while its agent was paused comes back to that agent: the lapsed attempt, still stopping, leaves the new one’s checkout alone', {
    timeout: 120_000,
  }, async () => {
    // Only this agent pulls work, so the lapsed claim comes back to it.
    for (const running of agents.splice(0)) await running.stop('SIGTERM');
    const paused = await agent('agent-paused');
    // On SIGTERM the install lingers a second (its trap), so the lapsed attempt ends, and cleans up,
    // after the new attempt has started in the same build directory.
    const d = await deploy(`${linkModules} && echo installing for a while && trap 'sleep 1; exit 143' TERM; sleep 3 & wait`);
    await eventually(async () => ((await buildLog(d)).includes('installing for a while') ? true : undefined), 60_000);
    process.kill(paused.pid, 'SIGSTOP');
    await new Promise((r) => setTimeout(r, 3000)); // twice the 1.5 s lease: the claim goes back to the queue
    process.kill(paused.pid, 'SIGCONT');
    const revision = await revisionReaches(api, d.id, d.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 60_000);
    expect(revision.status, `${revision.status_message}\n${paused.output()}`).toBe('DEPLOYED');
    expect(paused.output()).toContain(`stopped work on revision ${d.latest_revision_id}`);
    expect((await buildLog(d)).filter((m) => m.startsWith('local agent agent-paused: fetching')).length).toBeGreaterThanOrEqual(2);
    expect((await runGraph(paused.proxyPort, d.source_config.custom_url)).body.answer).toBe('the first answer');
  });

  it('an interrupt during a build ends the build’s processes', { timeout: 120_000 }, async () => {
    await agent('agent-interrupted');
    const d = await deploy(`echo started && exec sleep 300`);
    const buildDir = join(workDir, d.id, d.latest_revision_id);
    await eventually(async () => ((await buildLog(d)).includes('started') && processesIn(buildDir).length > 0 ? true : undefined), 60_000);
    const alive = () => processesIn(buildDir).length > 0;
    expect(alive()).toBe(true);
    expect((await api.post(`/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/interrupt`)).status).toBe(200);
    await eventually(async () => (alive() ? undefined : true), 15_000);
    expect((await api.get(`/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`)).body.status).toBe('INTERRUPTED');
  });

  it('fails at once what this machine cannot run: an image with no container engine, a Python graph with no `langgraph`', { timeout: 120_000 }, async () => {
    await agent('agent-four');
    const image = await api.post('/v2/deployments', dockerBody(uniqueName('image'), listener.listenerId));
    expect(image.status).toBe(201);
    const failed = await revisionReaches(api, image.body.id, image.body.latest_revision_id, ['DEPLOYED', 'DEPLOY_FAILED'], 60_000);
    expect(failed.status).toBe('DEPLOY_FAILED');
    expect(failed.status_message).toContain('A container engine is needed');

    repo.commit(
      { 'python/langgraph.json': JSON.stringify({ python_version: '3.11', graphs: { agent: './agent.py:graph' } }), 'python/agent.py': 'graph = None\n' },
      'A Python graph',
    );
    const python = await deploy('true', 'python/langgraph.json');
    const built = await revisionReaches(api, python.id, python.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED'], 60_000);
    expect(built.status).toBe('BUILD_FAILED');
    expect(built.status_message).toContain('`langgraph dev`');
  });
});
