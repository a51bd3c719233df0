import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testBackendKind } from '../helpers/backends.ts';
import { uniqueName } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

/**
 * The log cursor of contract §4, through the loops `langgraph deploy` runs, against a real server
 * in a child process. Both keep only a cursor the server gives them, as the CLI does in Python:
 * `offset = response["next_offset"] or offset`. `--verbose` polls the deploy log while the revision
 * is under way (every 3 s in the CLI; here each time its agent, the test, has written to it) and
 * prints each answer;
 * `logs --follow --limit 2` polls two lines at a time (every 2 s in the CLI). A follower must print
 * every stored line exactly once, in order, however the lines share timestamps.
 */

/** The CLI's request: every non-2xx is an error (httpx's raise_for_status). */
async function call(server: ServerProcess, method: string, path: string, body?: unknown, bearer?: string): Promise<any> {
  const response = await fetch(server.url + path, {
    method,
    headers: {
      ...(bearer ? { authorization: `Bearer ${bearer}` } : { 'X-Api-Key': server.apiKey }),
      ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status < 200 || response.status >= 300) throw new Error(`${method} ${path} → HTTP ${response.status}: ${text}`);
  return text ? JSON.parse(text) : null;
}

/** One poll of a follower: the CLI's body, then `offset = next_offset or offset` (Python's `or`: 0 and null keep the old one). */
async function poll(server: ServerProcess, path: string, state: { offset: number | string | null; printed: string[] }, limit: number): Promise<number> {
  const answer = await call(server, 'POST', path, { limit, order: 'asc', offset: state.offset, level: null, query: null, start_time: null, end_time: null });
  for (const line of answer.logs as Array<{ message: string }>) state.printed.push(line.message);
  state.offset = answer.next_offset || state.offset;
  return answer.logs.length;
}

describe(`langgraph deploy's log followers (${testBackendKind()})`, () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '600' });
  });
  afterAll(async () => {
    await server?.kill();
  });

  /** A deployment on a local listener of its own, whose work this test claimed as its agent: it appends to the deploy log and moves the revision on. */
  async function claimedDeployment(prefix: string) {
    const listener = await call(server, 'POST', '/v2/listeners', { compute_type: 'local', compute_id: uniqueName(prefix) });
    const token = (await call(server, 'POST', `/v2/listeners/${listener.id}/tokens`)).token as string;
    const created = await call(server, 'POST', '/v2/deployments', {
      name: uniqueName(prefix),
      source: 'external_docker',
      source_config: { listener_id: listener.id },
      source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.0.0' },
    });
    const claim = (await call(server, 'POST', `/v2/listeners/${listener.id}/agent/claim`, { agent_id: prefix, wait_seconds: 5 }, token)).work;
    let status = claim.revision.status as string;
    const append = (messages: string[]) =>
      call(
        server,
        'POST',
        `/v2/listeners/${listener.id}/agent/claims/${claim.claim_id}/logs`,
        { lines: messages.map((message) => ({ type: 'deploy', message })) },
        token,
      );
    const transition = async (to: string) => {
      await call(server, 'POST', `/v2/listeners/${listener.id}/agent/claims/${claim.claim_id}/transition`, { from: status, to }, token);
      status = to;
    };
    return { created, append, transition };
  }

  it('--verbose’s loop prints each log line once while it polls a revision under way, not the whole log on every poll', async () => {
    // The revision's agent is this test (a local listener's claim): its log grows between two
    // polls of the loop because the test appends to it there, not because a stage's time ran out
    // between them, which on a loaded machine it did not always do (2 polls where 3 were expected).
    const { created, append, transition } = await claimedDeployment('verbose');
    const agentSteps = [
      () => append(['pulling registry.example.com/acme/agent:1.0.0', 'pulled']),
      async () => {
        await transition('DEPLOYING');
        await append(['starting the container']);
      },
      async () => {
        await append(['container started', 'health check passed']);
        await transition('DEPLOYED');
      },
    ];
    const state = { offset: null as number | string | null, printed: [] as string[] };
    let polls = 0;
    let grown = 0;
    for (;;) {
      const revision = await call(server, 'GET', `/v2/deployments/${created.id}/revisions/${created.latest_revision_id}`);
      if ((await poll(server, `/v1/projects/${created.id}/revisions/${created.latest_revision_id}/deploy_logs`, state, 100)) > 0) grown += 1;
      polls += 1;
      if (['DEPLOYED', 'DEPLOY_FAILED'].includes(revision.status)) break;
      await agentSteps.shift()?.();
    }
    const stored = await call(server, 'POST', `/v1/projects/${created.id}/revisions/${created.latest_revision_id}/deploy_logs`, { order: 'asc', limit: 1000 });
    // Several polls saw the log grow (the agent wrote to it after each of the first three).
    expect(polls).toBeGreaterThanOrEqual(3);
    expect(grown).toBeGreaterThanOrEqual(3);
    expect(stored.logs.length).toBeGreaterThan(1);
    expect(state.printed).toEqual(stored.logs.map((l: { message: string }) => l.message));
  });

  it('logs --follow --limit 2 (by cursor) reads every line once when many are written at once, and then the lines that come later', async () => {
    const { created, append } = await claimedDeployment('follow');
    // One append is one write at one server time; its lines still get distinct, increasing times
    // (test/clients/log-follow.test.ts follows by time); the cursor does not depend on them.
    const first = Array.from({ length: 7 }, (_, i) => `first ${i}`);
    await append(first);
    const stored = await call(server, 'POST', `/v1/projects/${created.id}/revisions/${created.latest_revision_id}/deploy_logs`, { order: 'asc', limit: 1000 });
    expect(new Set(stored.logs.map((l: { timestamp: string }) => l.timestamp)).size).toBe(7);

    const path = `/v1/projects/${created.id}/revisions/${created.latest_revision_id}/deploy_logs`;
    const state = { offset: null as number | string | null, printed: [] as string[] };
    for (let i = 0; i < 8; i++) await poll(server, path, state, 2);
    expect(state.printed).toEqual(first);
    const later = Array.from({ length: 3 }, (_, i) => `later ${i}`);
    await append(later);
    for (let i = 0; i < 6; i++) await poll(server, path, state, 2);
    expect(state.printed).toEqual([...first, ...later]);
  });

  it('the v2 log route hands back a cursor on its last page too, so a follower of it reads each line once', async () => {
    const listeners = await call(server, 'GET', '/v2/listeners');
    const sandbox = listeners.resources.find((l: { compute_type: string }) => l.compute_type === 'sandbox').id as string;
    const created = await call(server, 'POST', '/v2/deployments', {
      name: uniqueName('v2logs'),
      source: 'external_docker',
      source_config: { listener_id: sandbox },
      source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.0.0' },
    });
    const printed: string[] = [];
    let offset: number | null = null;
    let status = '';
    while (status !== 'DEPLOYED') {
      status = (await call(server, 'GET', `/v2/deployments/${created.id}/revisions/${created.latest_revision_id}`)).status;
      const page = await call(
        server,
        'GET',
        `/v2/deployments/${created.id}/revisions/${created.latest_revision_id}/logs?type=deploy&limit=1${offset === null ? '' : `&offset=${offset}`}`,
      );
      printed.push(...page.logs.map((l: { message: string }) => l.message));
      offset = page.next_offset || offset;
      await new Promise((r) => setTimeout(r, 50));
    }
    for (let i = 0; i < 5; i++) {
      const page = await call(
        server,
        'GET',
        `/v2/deployments/${created.id}/revisions/${created.latest_revision_id}/logs?type=deploy&limit=1${offset === null ? '' : `&offset=${offset}`}`,
      );
      printed.push(...page.logs.map((l: { message: string }) => l.message));
      offset = page.next_offset || offset;
    }
    const all = await call(server, 'GET', `/v2/deployments/${created.id}/revisions/${created.latest_revision_id}/logs?type=deploy&limit=1000`);
    expect(printed).toEqual(all.logs.map((l: { message: string }) => l.message));
  });
});
