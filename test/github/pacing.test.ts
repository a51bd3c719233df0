import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { githubBody } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { deliver, pushPayload, sha } from '../webhooks/github.ts';
import { GithubStandIn } from './stand-in.ts';

const SECRET = 'pacing-webhook-secret';
const PUSHES = 200;
const CALLS_PER_PUSH = 5;

/**
 * Contract §19, "Writes are paced per installation, at most 80 a minute and 500 an hour", and "a 403
 * … otherwise at least 60 s": 200
 * pushes of one installation (each to a deployment of its own branch, so none replaces another)
 * through the whole app (in this process, sandbox data plane) and the real status sender, against
 * the GitHub stand-in. The server's clock stands still but for the test's jumps: whenever the
 * sender has stopped calling, the clock jumps a minute (ten when a minute freed nothing, as when
 * the hour is full), so two hours of GitHub's limits pass in seconds. The sender has stopped when
 * one of its passes, at the clock's current time, finds nothing due in the outbox: every event
 * left waits for the pace (or a retry) at a later time, and none of its calls is in flight (its
 * passes are one at a time), so no call made before a jump is dated after it.
 */
describe('pacing per installation under 200 pushes', () => {
  let github: GithubStandIn;
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let server: ServerType;
  let base: string;
  // The server's clock stands still but for the test's jumps (the sandbox's stages run on real time);
  // each jump is kept to date the stand-in's exchanges on the server's clock.
  const startMs = Date.now();
  let offsetMs = 0;
  const jumps: Array<{ atMs: number; offsetMs: number }> = [];
  const clock = { now: () => new Date(startMs + offsetMs).toISOString() };
  const serverTimeOf = (atMs: number) => startMs + (jumps.findLast((j) => j.atMs <= atMs)?.offsetMs ?? 0);

  beforeAll(async () => {
    github = await new GithubStandIn().start();
    // One world: GitHub's clock moves with the server's (it checks the App's JWTs and its tokens' expiry on it).
    github.now = () => startMs + offsetMs;
    t = await inProcessApp({ stageMs: 1, clock, env: { ...github.serverEnv(), GITHUB_WEBHOOK_SECRET: SECRET, RECONCILE_INTERVAL_MS: '0' } });
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const dueEvents = t.backend.github.dueEvents.bind(t.backend.github);
    t.backend.github.dueEvents = async (now, limit) => {
      const due = await dueEvents(now, limit);
      if (due.length === 0 && now === clock.now()) idlePasses += 1;
      return due;
    };
  });

  /** The sender's passes that found nothing due at the clock's time of the pass. */
  let idlePasses = 0;
  /** Until a pass that starts from now finds nothing due at the clock's current time: the sender has stopped calling. */
  const senderStopped = async () => {
    const after = idlePasses;
    await eventually(async () => (idlePasses > after ? true : undefined), 120_000, 20);
  };

  afterAll(async () => {
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    await t?.close();
    await github?.stop();
  });

  /** A proven link of the installation to the workspace (how it is proven is setup-flow.test.ts's). */
  const link = async (installationId: number, login: string, accountId: number) => {
    const integration = {
      id: crypto.randomUUID(),
      tenant_id: t.workspaceId,
      installation_id: installationId,
      name: login,
      suspended: false,
      created_at: clock.now(),
    };
    await t.backend.github.linkInstallation(integration, { login, id: accountId, type: 'Organization' }, clock.now());
    return integration.id;
  };
  const createOn = async (integrationId: string, repo: string, ref: string) => {
    const created = await t.api.post(
      '/v2/deployments',
      githubBody(`paced-${repo.replace('/', '-')}-${ref}`, integrationId, {
        source_config: { integration_id: integrationId, repo_url: `${github.url}/${repo}`, deployment_type: 'dev', build_on_push: true },
        source_revision_config: { repo_ref: ref, graph_config_path: 'langgraph.json' },
        secrets: [],
      }),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  };
  const push = async (repo: string, installationId: number, ref: string) => {
    const after = sha();
    const payload = pushPayload({ repo, after, ref: `refs/heads/${ref}`, htmlUrl: `${github.url}/${repo}`, installationId });
    expect((await deliver(base, 'push', payload, { secret: SECRET })).status).toBe(202);
    return after;
  };
  /** GitHub's content-creating calls on a repository (deployments, statuses) in the order received: those GitHub took, or all. */
  const writesOn = (repo: string, taken = true) =>
    github.exchanges.filter((e) => e.method !== 'GET' && e.path.startsWith(`/repos/${repo}/`) && (!taken || e.status < 300));
  /** The most calls in any `windowMs` of the server's clock. */
  const mostIn = (times: number[], windowMs: number) => Math.max(...times.map((at) => times.filter((x) => x >= at && x < at + windowMs).length));

  it("sends every status of 200 pushes, never more than 80 in a minute or 500 in an hour of the server's clock, waits a minute after a bare 403, and lets another installation go at once", async () => {
    const paced = github.install({ login: 'acme', id: 501, type: 'Organization' }, ['acme/paced'], ['alice']);
    const other = github.install({ login: 'bcme', id: 502, type: 'Organization' }, ['bcme/other'], ['alice']);
    const pacedLink = await link(paced, 'acme', 501);
    const otherLink = await link(other, 'bcme', 502);
    for (let i = 0; i < PUSHES; i++) await createOn(pacedLink, 'acme/paced', `b${i}`);
    await createOn(otherLink, 'bcme/other', 'main');
    const pushed: string[] = [];
    for (let i = 0; i < PUSHES; i++) pushed.push(await push('acme/paced', paced, `b${i}`));

    // The first 80 go at once (a burst under the limit is not slowed), then the installation waits its turn.
    await eventually(async () => (writesOn('acme/paced').length >= 80 ? true : undefined), 120_000, 50);
    // Another installation's push is not queued behind it: its five calls land with the clock standing still.
    const otherPush = await push('bcme/other', other, 'main');
    // (Generous: the pipeline takes the 200 revisions first, about a minute on PostgreSQL; the clock does not move meanwhile.)
    await eventually(async () => (writesOn('bcme/other').length === CALLS_PER_PUSH ? true : undefined), 180_000, 50);
    expect(github.commitStatuses.filter((c) => c.sha === otherPush).map((c) => c.body.state)).toEqual(['pending', 'success']);
    expect(jumps).toEqual([]);
    // The installation's next call meets GitHub's bare secondary limit (a 403 naming no time): no call of it for a minute.
    github.fail({
      method: 'POST',
      path: /^\/repos\/acme\/paced\//,
      status: 403,
      body: {
        message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
        documentation_url: 'https://docs.github.com',
      },
    });

    // Time passes only when the sender waits: the clock jumps a minute, or ten when a minute freed nothing.
    let seen = -1;
    let freedNothing = false;
    const deadline = Date.now() + 240_000;
    while (writesOn('acme/paced').length < PUSHES * CALLS_PER_PUSH) {
      if (Date.now() > deadline) throw new Error(`only ${writesOn('acme/paced').length} of ${PUSHES * CALLS_PER_PUSH} calls made`);
      await senderStopped();
      const count = writesOn('acme/paced').length;
      if (count !== seen && jumps.length > 0) freedNothing = false;
      seen = count;
      if (count === PUSHES * CALLS_PER_PUSH) break;
      offsetMs += freedNothing ? 600_000 : 61_000;
      jumps.push({ atMs: performance.now(), offsetMs });
      freedNothing = true;
    }
    // Stopped once more after the last call: a call sent twice would have been sent by now.
    await senderStopped();

    const writes = writesOn('acme/paced');
    // Each call once: nothing dropped for the pace, nothing sent twice.
    expect(writes).toHaveLength(PUSHES * CALLS_PER_PUSH);
    const succeeded = new Set(github.commitStatuses.filter((c) => c.repo === 'acme/paced' && c.body.state === 'success').map((c) => c.sha));
    expect(pushed.filter((after) => !succeeded.has(after))).toEqual([]);
    // The limits on the server's clock (it moved only at the jumps, each made after a second without a call).
    const times = writes.map((e) => serverTimeOf(e.atMs));
    expect(mostIn(times, 60_000)).toBeLessThanOrEqual(80);
    expect(mostIn(times, 3_600_000)).toBeLessThanOrEqual(500);
    // The bare 403 was waited out for at least a minute, then its call landed (counted above).
    const limited = writesOn('acme/paced', false).find((e) => e.status === 403)!;
    const afterLimit = writes.find((e) => e.atMs > limited.atMs)!;
    expect(serverTimeOf(afterLimit.atMs) - serverTimeOf(limited.atMs)).toBeGreaterThanOrEqual(60_000);
    // And it was the pace that spread them: two hours of the server's clock for 1,000 calls.
    expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(3_600_000);
    expect(github.problems()).toEqual([]);
  }, 600_000);
});
