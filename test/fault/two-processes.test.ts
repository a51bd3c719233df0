import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import type { Clock } from '../../server/lib/clock.ts';
import { createLogger, type Logger } from '../../server/logger.ts';
import { agentCall } from '../helpers/agent-call.ts';
import { type Api, eventually } from '../helpers/api.ts';
import { testDatabaseUrl } from '../helpers/backends.ts';
import { dockerBody, githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { movableClock } from '../helpers/movable-clock.ts';
import { agentProject, gzipTarball } from '../helpers/tarball.ts';
import { pushPayload, sha, signature } from '../webhooks/github.ts';

/**
 * Two control planes on one PostgreSQL database, each with its own process id, as two server
 * processes would be: each started revision, teardown and webhook delivery is
 * one process's work under a lease, and a process that stops renewing (dies) has its work taken
 * over by the other once the lease has passed. A process "dies" here by `close()`: its timers stop,
 * its sandbox stops mid-stage and its database pool closes, so it writes nothing more and leaves
 * nothing but its leases behind, as a SIGKILL would (the `cluster` suite SIGKILLs real processes).
 */

type App = Awaited<ReturnType<typeof inProcessApp>>;
const LEASE_MS = '600';
/** For the tests that assert nothing is taken over from a live process: a stall of a third of this fails them. */
const LIVE_LEASE = { PIPELINE_LEASE_MS: '2000' };
const TERMINAL = new Set(['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'CREATE_FAILED', 'SKIPPED', 'INTERRUPTED']);
const IN_PROGRESS = ['AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING'];

const opened: App[] = [];
/** The encryption key of each database: its processes share it, as servers given one ENCRYPTION_KEY do. */
const keys = new Map<string, SecretBox>();
async function processOn(url: string, processId: string, stageMs: number, env: Record<string, string> = {}, log?: Logger, clock?: Clock): Promise<App> {
  if (!keys.has(url)) keys.set(url, new SecretBox(randomBytes(32)));
  const app = await inProcessApp({ path: url, processId, stageMs, secretBox: keys.get(url), env: { PIPELINE_LEASE_MS: LEASE_MS, ...env }, log, clock });
  opened.push(app);
  return app;
}
async function die(app: App): Promise<void> {
  opened.splice(opened.indexOf(app), 1);
  await app.close();
}
afterEach(async () => {
  for (const app of opened.splice(0)) await app.close();
});

/** Which process holds the deployment's teardown (null before one has claimed it). */
async function teardownOwner(app: App, deploymentId: string): Promise<string | null> {
  return (await app.sql.get<{ teardown_owner: string | null }>('SELECT teardown_owner FROM deployments WHERE id = ?', deploymentId))?.teardown_owner ?? null;
}
/** Until `app` answers the deployment 404 (its teardown finished), for up to `ms`. */
async function removed(app: App, deploymentId: string, ms: number): Promise<void> {
  await eventually(async () => ((await app.api.get(`/v2/deployments/${deploymentId}`)).status === 404 ? true : undefined), ms);
}
async function sandboxListener(api: Api): Promise<string> {
  return (await api.get('/v2/listeners')).body.resources.find((l: { compute_type: string }) => l.compute_type === 'sandbox').id;
}

describe('two server processes on one PostgreSQL database', () => {
  it('a process that dies mid-stage has its revisions, its queue and its teardown finished by the other after the lease', async () => {
    const url = await testDatabaseUrl('postgres');
    // A's stages would take an hour: whatever it started is still mid-stage when it dies.
    const a = await processOn(url, 'process-a', 3_600_000);
    const listenerId = await sandboxListener(a.api);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const created = await a.api.post('/v2/deployments', dockerBody(uniqueName('death'), listenerId));
      expect(created.status).toBe(201);
      ids.push(created.body.id);
    }
    // A queued revision behind the one in progress, and a deletion under way.
    const patched = await a.api.patch(`/v2/deployments/${ids[0]}`, { secrets: [{ name: 'AFTER', value: '1' }] });
    expect(patched.status).toBe(200);
    const queuedId = patched.body.latest_revision_id as string;
    expect((await a.api.delete(`/v2/deployments/${ids[3]}`)).status).toBe(204);
    await eventually(async () => ((await teardownOwner(a, ids[3]!)) === 'process-a' ? true : undefined), 10_000);
    // The teardown interrupts the deleted deployment's revision after it claimed the deletion.
    await eventually(
      async () =>
        (await a.sql.get<{ status: string }>('SELECT status FROM revisions WHERE deployment_id = ?', ids[3]))?.status === 'INTERRUPTED' ? true : undefined,
      10_000,
    );
    const started = await a.sql.all<{ id: string; status: string }>(
      "SELECT id, status FROM revisions WHERE status NOT IN ('QUEUED', 'INTERRUPTED') ORDER BY seq",
    );
    expect(started.map((r) => r.status)).toEqual(['DEPLOYING', 'DEPLOYING', 'DEPLOYING']);
    // A renews its leases while it lives.
    await eventually(
      async () => ((await a.sql.all("SELECT 1 FROM revisions WHERE runner_id = 'process-a' AND status = 'DEPLOYING'")).length === 3 ? true : undefined),
      10_000,
    );

    await die(a);
    const b = await processOn(url, 'process-b', 20);
    for (const id of ids.slice(0, 3)) {
      const revisions = await eventually(async () => {
        const list = (await b.api.get(`/v2/deployments/${id}/revisions?limit=10`)).body.resources as Array<{ id: string; status: string }>;
        return list.length > 0 && list.every((r) => TERMINAL.has(r.status)) ? list : undefined;
      }, 10_000);
      // The newest one deployed (for the first deployment, the queued one, started by B).
      expect(revisions[0]!.status).toBe('DEPLOYED');
    }
    expect((await b.api.get(`/v2/deployments/${ids[0]}/revisions/${queuedId}`)).body.status).toBe('DEPLOYED');
    await removed(b, ids[3]!, 10_000);
    // B took them over: the rows name it, and each stage change was written once.
    for (const { id } of started) {
      expect(await b.sql.get('SELECT runner_id FROM revisions WHERE id = ?', id)).toEqual({ runner_id: 'process-b' });
      const finished = await b.sql.all("SELECT 1 FROM revision_logs WHERE revision_id = ? AND message LIKE 'sandbox: simulated deploy finished%'", id);
      expect(finished).toHaveLength(1);
    }
  });

  it('a process that stalls past its lease loses its revisions to the other; renewing again, it learns so and holds none of them', async () => {
    const url = await testDatabaseUrl('postgres');
    const warnings: Array<Record<string, unknown>> = [];
    const log = createLogger('warn', (line) => warnings.push(JSON.parse(line) as Record<string, unknown>));
    // A renews every 5 s (a lease of 15 s) and its stages take an hour: only B can finish its revisions.
    const a = await processOn(url, 'process-a', 3_600_000, { PIPELINE_LEASE_MS: '15000' }, log);
    const listenerId = await sandboxListener(a.api);
    const revisionIds: string[] = [];
    for (let i = 0; i < 3; i++) revisionIds.push((await a.api.post('/v2/deployments', dockerBody(uniqueName('stall'), listenerId))).body.latest_revision_id);
    const runners = async () =>
      await a.sql.all<{ runner_id: string | null; status: string }>(`SELECT runner_id, status FROM revisions WHERE id IN (?, ?, ?)`, ...revisionIds);
    await eventually(async () => ((await runners()).every((r) => r.runner_id === 'process-a') ? true : undefined), 15_000);
    await processOn(url, 'process-b', 20);
    // A stall as the others see it: A's lease runs out. It is made to, just after one of A's renewals,
    // so that B (sweeping every 300 ms) takes the revisions over before A's next renewal, 5 s later.
    const leaseOfA = async () =>
      (await a.sql.get<{ lease_expires_at: string }>("SELECT lease_expires_at FROM process_leases WHERE process_id = 'process-a'"))!.lease_expires_at;
    const current = await leaseOfA();
    await eventually(async () => ((await leaseOfA()) !== current ? true : undefined), 15_000, 10);
    await a.sql.run("UPDATE process_leases SET lease_expires_at = '1970-01-01T00:00:00.000Z' WHERE process_id = 'process-a'");
    await eventually(async () => ((await runners()).every((r) => r.runner_id === 'process-b' && r.status === 'DEPLOYED') ? true : undefined), 10_000);
    expect(warnings.find((w) => /lease had lapsed/.test(String(w.msg)))).toBeUndefined();
    // A's next renewal finds its lease gone: it keeps none of the revisions B took, and is live again.
    const lapse = await eventually(async () => warnings.find((w) => /lease had lapsed/.test(String(w.msg))), 15_000);
    expect(lapse).toMatchObject({ level: 'warn', revisions_dropped: 3, revisions_kept: 0 });
    expect(Date.parse(await leaseOfA())).toBeGreaterThan(Date.now());
    expect((await runners()).map((r) => r.runner_id)).toEqual(['process-b', 'process-b', 'process-b']);
  });

  it('a process that shuts down cleanly hands its revisions and teardowns to the other at once, not a lease later', async () => {
    const url = await testDatabaseUrl('postgres');
    // A lease far longer than the wait below: only a hand-back at shutdown lets B finish in time.
    const longLease = { PIPELINE_LEASE_MS: '60000' };
    const a = await processOn(url, 'process-a', 3_600_000, longLease);
    const listenerId = await sandboxListener(a.api);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await a.api.post('/v2/deployments', dockerBody(uniqueName('clean'), listenerId))).body.id);
    expect((await a.api.delete(`/v2/deployments/${ids[2]}`)).status).toBe(204);
    await eventually(async () => ((await teardownOwner(a, ids[2]!)) === 'process-a' ? true : undefined), 10_000);
    opened.splice(opened.indexOf(a), 1);
    await a.stopCleanly();

    const b = await processOn(url, 'process-b', 20, longLease);
    for (const id of ids.slice(0, 2)) {
      await eventually(async () => {
        const list = (await b.api.get(`/v2/deployments/${id}/revisions?limit=10`)).body.resources as Array<{ status: string }>;
        return list.length > 0 && list.every((r) => r.status === 'DEPLOYED') ? true : undefined;
      }, 15_000);
    }
    await removed(b, ids[2]!, 15_000);
  });

  it('a teardown an agent reported done while no process waited for it is finished by the process that takes it over', async () => {
    const url = await testDatabaseUrl('postgres');
    // The processes' clock stands still but for the test's move: the report below lands while A's
    // dead lease still holds the teardown, however slowly B starts on a loaded machine.
    const clock = movableClock({ standing: true });
    const lease = { PIPELINE_LEASE_MS: LEASE_MS };
    const a = await processOn(url, 'process-a', 20, lease, undefined, clock);
    const listener = (await a.api.post('/v2/listeners', { compute_type: 'local', compute_id: `m-${crypto.randomUUID().slice(0, 8)}` })).body.id as string;
    const token = (await a.api.post(`/v2/listeners/${listener}/tokens`)).body.token as string;
    const created = await a.api.post('/v2/deployments', dockerBody(uniqueName('reported'), listener));
    expect((await a.api.delete(`/v2/deployments/${created.body.id}`)).status).toBe(204);
    await eventually(async () => ((await teardownOwner(a, created.body.id)) === 'process-a' ? true : undefined), 10_000);
    await die(a);

    // The agent tears the deployment down and reports it to B, which is not waiting for it.
    const b = await processOn(url, 'process-b', 20, lease, undefined, clock);
    const asAgent = (path: string, body?: unknown) => agentCall(b.app, listener, token, path, body);
    const claimed = await asAgent('/claim', { agent_id: 'agent-1', wait_seconds: 0 });
    expect(claimed.body.work).toMatchObject({ kind: 'teardown', deployment: { id: created.body.id } });
    expect((await asAgent(`/claims/${claimed.body.work.claim_id}/done`)).status).toBe(204);
    expect(await teardownOwner(b, created.body.id)).toBe('process-a');

    // B takes the teardown over once A's lease has passed, finds the stored report and removes the
    // deployment; no agent is offered the teardown again (before the report was stored, B waited
    // for an agent forever here).
    clock.advance(Number(LEASE_MS) + 1);
    await removed(b, created.body.id, 25_000);
    expect((await asAgent('/claim', { agent_id: 'agent-1', wait_seconds: 0 })).body.work).toBeNull();
  });

  it('a forced DELETE answered by a process that then dies still ends the teardown: the process that takes it over removes the deployment', async () => {
    const url = await testDatabaseUrl('postgres');
    // The processes' clock stands still but for the test's move: A's dead lease holds the teardown
    // while B answers, however slowly B starts on a loaded machine.
    const clock = movableClock({ standing: true });
    const lease = { PIPELINE_LEASE_MS: LEASE_MS };
    // A waits for an agent that never comes, and dies.
    const a = await processOn(url, 'process-a', 20, lease, undefined, clock);
    const listener = (await a.api.post('/v2/listeners', { compute_type: 'local', compute_id: `gone-${crypto.randomUUID().slice(0, 8)}` })).body.id as string;
    const created = await a.api.post('/v2/deployments', dockerBody(uniqueName('forced'), listener));
    expect((await a.api.delete(`/v2/deployments/${created.body.id}`)).status).toBe(204);
    await eventually(async () => ((await teardownOwner(a, created.body.id)) === 'process-a' ? true : undefined), 10_000);
    await die(a);
    // B acknowledges the forced DELETE while A's dead lease still holds the teardown, and dies too.
    const b = await processOn(url, 'process-b', 20, lease, undefined, clock);
    expect((await b.api.delete(`/v2/deployments/${created.body.id}?force=true`)).status).toBe(204);
    expect(await teardownOwner(b, created.body.id)).toBe('process-a');
    await die(b);
    // C knows of the force only through the database (it waited for an agent forever before).
    clock.advance(Number(LEASE_MS) + 1);
    const c = await processOn(url, 'process-c', 20, lease, undefined, clock);
    await removed(c, created.body.id, 25_000);
  });

  it("a take-over of a listener agent's revision only wakes the agent: its stage and the agents' claims are untouched", async () => {
    const url = await testDatabaseUrl('postgres');
    const a = await processOn(url, 'process-a', 20);
    const listener = await a.api.post('/v2/listeners', { compute_type: 'local', compute_id: `local-${crypto.randomUUID().slice(0, 8)}` });
    expect(listener.status).toBe(201);
    const created = await a.api.post('/v2/deployments', dockerBody(uniqueName('agent'), listener.body.id));
    expect(created.status).toBe(201);
    const revisionId = created.body.latest_revision_id as string;
    // No agent has claimed it: it waits in its first stage, the lease A renews being all that is written.
    await eventually(
      async () =>
        (await a.sql.get<{ runner_id: string }>('SELECT runner_id FROM revisions WHERE id = ?', revisionId))?.runner_id === 'process-a' ? true : undefined,
      10_000,
    );
    const before = await a.sql.get<{ status: string; version: number }>('SELECT status, version FROM revisions WHERE id = ?', revisionId);
    expect(before!.status).toBe('AWAITING_DEPLOY');
    await die(a);
    const b = await processOn(url, 'process-b', 20);
    await eventually(
      async () =>
        (await b.sql.get<{ runner_id: string }>('SELECT runner_id FROM revisions WHERE id = ?', revisionId))?.runner_id === 'process-b' ? true : undefined,
      10_000,
    );
    // Well past the take-over: still the agents' work, in the same stage, and no claim made for it.
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(await b.sql.get('SELECT status, version FROM revisions WHERE id = ?', revisionId)).toEqual(before);
    expect(await b.sql.all('SELECT work_key FROM agent_claims')).toEqual([]);
    expect(await b.sql.all("SELECT message FROM revision_logs WHERE revision_id = ? AND message LIKE 'sandbox%'", revisionId)).toEqual([]);
  });

  it("a second process starting while the first lives does not run the first one's revisions again", async () => {
    const url = await testDatabaseUrl('postgres');
    // Each stage lasts longer than the lease: only A's renewals keep its revisions its own.
    const a = await processOn(url, 'process-a', 2500, LIVE_LEASE);
    const listenerId = await sandboxListener(a.api);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await a.api.post('/v2/deployments', dockerBody(uniqueName('alive'), listenerId))).body.id);
    const b = await processOn(url, 'process-b', 2500, LIVE_LEASE);
    for (const id of ids) {
      await eventually(async () => {
        const list = (await b.api.get(`/v2/deployments/${id}/revisions?limit=10`)).body.resources as Array<{ status: string }>;
        return list.every((r) => TERMINAL.has(r.status)) ? true : undefined;
      }, 15_000);
    }
    const revisions = await a.sql.all<{ id: string; runner_id: string; status: string }>('SELECT id, runner_id, status FROM revisions');
    expect(revisions).toHaveLength(5);
    for (const revision of revisions) {
      expect(revision).toMatchObject({ runner_id: 'process-a', status: 'DEPLOYED' });
      // One line per stage change: the create's start of the deploy, and its end.
      const lines = await a.sql.all<{ message: string }>(
        "SELECT message FROM revision_logs WHERE revision_id = ? AND type = 'deploy' ORDER BY seq",
        revision.id,
      );
      expect(lines.map((l) => l.message.replace(/ of .*|;.*/, ''))).toEqual(['sandbox: simulated deploy', 'sandbox: simulated deploy finished']);
    }
  });

  it('50 concurrent PATCHes spread over both processes leave one revision in progress at a time', async () => {
    const url = await testDatabaseUrl('postgres');
    const a = await processOn(url, 'process-a', 40);
    const b = await processOn(url, 'process-b', 40);
    const listenerId = await sandboxListener(a.api);
    const deploymentId = (await a.api.post('/v2/deployments', dockerBody(uniqueName('conc'), listenerId))).body.id as string;
    let sampling = true;
    let worst = 0;
    let samples = 0;
    const sampler = (async () => {
      while (sampling) {
        const row = await a.sql.get<{ n: number }>(
          `SELECT count(*) AS n FROM revisions WHERE deployment_id = ? AND status IN (${IN_PROGRESS.map((s) => `'${s}'`).join(',')})`,
          deploymentId,
        );
        worst = Math.max(worst, row!.n);
        samples += 1;
      }
    })();
    const patches = await Promise.all(
      Array.from({ length: 50 }, (_, i) => (i % 2 ? b : a).api.patch(`/v2/deployments/${deploymentId}`, { secrets: [{ name: 'ATTEMPT', value: String(i) }] })),
    );
    for (const patch of patches) expect(patch.status).toBe(200);
    const final = await eventually(async () => {
      const list = (await b.api.get(`/v2/deployments/${deploymentId}/revisions?limit=100`)).body.resources as Array<{ id: string; status: string }>;
      return list.every((r) => TERMINAL.has(r.status)) ? list : undefined;
    }, 30_000);
    sampling = false;
    await sampler;
    expect(final).toHaveLength(51);
    expect(samples).toBeGreaterThan(10);
    expect(worst).toBeLessThanOrEqual(1);
    // The newest revision is the one that deployed last.
    expect((await a.api.get(`/v2/deployments/${deploymentId}`)).body.active_revision_id).toBe(final[0]!.id);
  });

  it('the same push delivered six times under different ids, to both processes, makes one revision; each delivery is processed once', async () => {
    const url = await testDatabaseUrl('postgres');
    // A short processing delay lets the deliveries gather, so both workers claim at the same moments.
    const env = { WEBHOOK_PROCESS_DELAY_MS: '300' };
    const a = await processOn(url, 'process-a', 3_600_000, env);
    const b = await processOn(url, 'process-b', 3_600_000, env);
    const fx = await workspaceFixtures(a.api);
    const hook = await a.api.post('/v1/webhooks/github/secret', {});
    expect(hook.status).toBe(201);
    const path = new URL(hook.body.payload_url).pathname;
    const repo = `acme/${uniqueName('six')}`;
    const created = await a.api.post(
      '/v2/deployments',
      githubBody(uniqueName('six'), fx.integrationId, {
        source_config: { integration_id: fx.integrationId, repo_url: `https://github.com/${repo}`, deployment_type: 'dev', build_on_push: true },
      }),
    );
    expect(created.status).toBe(201);
    const commit = sha();
    const body = JSON.stringify(pushPayload({ repo, after: commit, installationId: null }));
    const signed = await signature(hook.body.secret, body);
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        (i % 2 ? b : a).app.request(path, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': crypto.randomUUID(), 'x-hub-signature-256': signed },
          body,
        }),
      ),
    );
    for (const answer of answers) expect(answer.status).toBe(202);
    const deliveries = await eventually(async () => {
      const rows = await a.sql.all<{ status: string; attempts: number; claimed_by: string }>('SELECT status, attempts, claimed_by FROM webhook_deliveries');
      return rows.length === 6 && rows.every((r) => r.status === 'processed') ? rows : undefined;
    }, 10_000);
    // Processed exactly once each (a second processing would count a second attempt).
    for (const delivery of deliveries) expect(delivery).toMatchObject({ attempts: 1, claimed_by: expect.stringMatching(/^process-[ab]$/) });
    const pushes = await a.sql.all('SELECT id FROM revisions WHERE deployment_id = ? AND commit_sha = ?', created.body.id, commit);
    expect(pushes).toHaveLength(1);
  });

  it("an upload is released only when its receiving process dies, never while it streams: another process's start and sweeps leave it alone", async () => {
    const url = await testDatabaseUrl('postgres');
    const a = await processOn(url, 'process-a', 20, LIVE_LEASE);
    const deploymentId = (await a.api.post('/v2/deployments', { name: uniqueName('upload'), source: 'internal_source' })).body.id as string;
    const tarball = await gzipTarball(agentProject());
    /** A PUT to A whose body arrives in two parts; `rest()` sends the second and ends it. */
    const slowPut = async () => {
      const target = new URL((await a.api.post(`/v2/deployments/${deploymentId}/upload-url`)).body.upload_url);
      let controller!: ReadableStreamDefaultController<Uint8Array>;
      const body = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
      controller.enqueue(tarball.subarray(0, 10));
      const answer = a.app.request(`${target.pathname}${target.search}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/gzip' },
        body,
        duplex: 'half',
      } as RequestInit);
      const id = target.pathname.split('/').at(-1)!;
      await eventually(
        async () => ((await a.sql.get<{ state: string }>('SELECT state FROM uploads WHERE id = ?', id))?.state === 'receiving' ? true : undefined),
        10_000,
      );
      return { id, answer, rest: () => (controller.enqueue(tarball.subarray(10)), controller.close()) };
    };
    const live = await slowPut();
    // B starts (releasing interrupted uploads) and sweeps for more than two leases while A streams.
    const b = await processOn(url, 'process-b', 20, LIVE_LEASE);
    await new Promise((resolve) => setTimeout(resolve, 4500));
    expect(await b.sql.get('SELECT state, receiver_id FROM uploads WHERE id = ?', live.id)).toEqual({ state: 'receiving', receiver_id: 'process-a' });
    live.rest();
    expect((await live.answer).status).toBe(200);
    expect(await b.sql.get('SELECT state FROM uploads WHERE id = ?', live.id)).toEqual({ state: 'complete' });
    // A PUT cut off by A's death: B releases it once A's lease has passed, and the URL works again.
    const cut = await slowPut();
    void Promise.resolve(cut.answer).catch(() => undefined);
    await die(a);
    await eventually(
      async () => ((await b.sql.get<{ state: string }>('SELECT state FROM uploads WHERE id = ?', cut.id))?.state === 'issued' ? true : undefined),
      10_000,
    );
    expect(await b.sql.all('SELECT seq FROM upload_chunks WHERE upload_id = ?', cut.id)).toEqual([]);
  });
});
