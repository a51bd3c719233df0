import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { createBuiltOnPush, outboxDrained as outboxDrainedOf, pushCommit, startGithubScene } from './scene.ts';
import { serverSql } from './sql.ts';
import type { GithubStandIn } from './stand-in.ts';

const SECRET = 'outbox-webhook-secret';

/**
 * Contract §12, "Status back to GitHub", through the real server (sandbox data plane: it builds
 * nothing, and moves revisions through the same transitions) and the GitHub stand-in checked
 * against GitHub's description: deployments, deployment statuses and commit statuses, in order,
 * each state once, through outages, a kill -9 and GitHub's status cap.
 */
describe('revision changes reach GitHub through the durable outbox', () => {
  let github: GithubStandIn;
  let server: ServerProcess;
  let api: Api;
  let installation: number;
  let integrationId: string;
  const settings = { GITHUB_WEBHOOK_SECRET: SECRET, RECONCILE_INTERVAL_MS: '0', LOG_LEVEL: 'info' };
  const env = () => ({ ...github.serverEnv(), ...settings });

  beforeAll(async () => {
    ({ github, server, api, installation, integrationId } = await startGithubScene({ repos: ['acme/agent'], env: settings }));
  });

  afterAll(async () => {
    await server?.kill('SIGKILL');
    await github?.stop();
  });

  const create = (name: string, ref = 'main', secrets: Array<{ name: string; value: string }> = [], deploymentType = 'dev') =>
    createBuiltOnPush({ api, github, integrationId }, name, 'acme/agent', { ref, secrets, deploymentType });
  const push = (deploymentId: string, ref = 'refs/heads/main') => pushCommit({ api, github, installation, server }, SECRET, deploymentId, 'acme/agent', ref);
  const deploymentStates = (commit: string, environment: string) =>
    github.deployments.filter((d) => d.body.ref === commit && d.body.environment === environment).map((d) => d.statuses.map((s) => s.state));
  const commitStates = (commit: string, context: string) =>
    github.commitStatuses.filter((c) => c.sha === commit && c.body.context === context).map((c) => c.body.state);
  const outboxDrained = () => outboxDrainedOf(server);

  it('reports a push as a GitHub deployment and a commit status, success with the URL, and the replaced one inactive', async () => {
    const deployment = await create(uniqueName('status'));
    const first = await push(deployment.id);
    await revisionReaches(api, deployment.id, first.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    expect(deploymentStates(first.after, deployment.name)).toEqual([['in_progress', 'success']]);
    expect(commitStates(first.after, `deploy/${deployment.name}`)).toEqual(['pending', 'success']);
    const made = github.deployments.find((d) => d.body.ref === first.after)!;
    expect(made.body).toMatchObject({ auto_merge: false, required_contexts: [], environment: deployment.name, transient_environment: false });
    const success = made.statuses.at(-1)!;
    expect(success.environment_url).toBe(deployment.source_config.custom_url);
    // Both links open the console's revision page in a browser, not a JSON route that wants an API key.
    const revisionPage = new RegExp(`^http://[^/]+/console/deployments/${deployment.id}/revisions/${first.revision.id}$`);
    expect(success.log_url).toMatch(revisionPage);
    const status = github.commitStatuses.find((c) => c.sha === first.after && c.body.state === 'success')!;
    expect(status.body.target_url).toMatch(revisionPage);
    expect(String(status.body.description).length).toBeLessThanOrEqual(140);

    // Every request the server makes to GitHub for one push (token mints and reads included), through to DEPLOYED.
    const callsBefore = github.exchanges.length;
    const second = await push(deployment.id);
    await revisionReaches(api, deployment.id, second.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    const calls = github.exchanges.slice(callsBefore).map((e) => `${e.method} ${e.template}`);
    // Five (docs/decisions/github-round-2.md, "Calls per push"; seven before): the deployment's creation is its
    // queued state, and its success carries auto_inactive, so GitHub marks the replaced one inactive itself.
    expect(calls).toEqual([
      'POST /repos/{owner}/{repo}/deployments',
      'POST /repos/{owner}/{repo}/statuses/{sha}',
      'POST /repos/{owner}/{repo}/deployments/{deployment_id}/statuses',
      'POST /repos/{owner}/{repo}/deployments/{deployment_id}/statuses',
      'POST /repos/{owner}/{repo}/statuses/{sha}',
    ]);
    expect(calls.length).toBeLessThanOrEqual(5);
    const successStatus = github.deployments.find((d) => d.body.ref === second.after)!.statuses.at(-1)!;
    expect(successStatus).toMatchObject({ state: 'success', auto_inactive: true });
    expect(deploymentStates(second.after, deployment.name)).toEqual([['in_progress', 'success']]);
    expect(deploymentStates(first.after, deployment.name)).toEqual([['in_progress', 'success', 'inactive']]);

    // Deleting the deployment marks its live GitHub deployment inactive.
    expect((await api.delete(`/v2/deployments/${deployment.id}`)).status).toBe(204);
    await eventually(async () => (deploymentStates(second.after, deployment.name)[0]?.at(-1) === 'inactive' ? true : undefined), 30_000);
    await outboxDrained();
    expect(deploymentStates(second.after, deployment.name)).toEqual([['in_progress', 'success', 'inactive']]);
    expect(github.problems()).toEqual([]);
  });

  it('reports a failing build as failure', async () => {
    const deployment = await create(uniqueName('failing'), 'broken', [{ name: 'SANDBOX_FAIL_STAGE', value: 'build' }]);
    const broken = await push(deployment.id, 'refs/heads/broken');
    await revisionReaches(api, deployment.id, broken.revision.id, ['BUILD_FAILED'], 30_000);
    await outboxDrained();
    expect(deploymentStates(broken.after, deployment.name)).toEqual([['in_progress', 'failure']]);
    expect(commitStates(broken.after, `deploy/${deployment.name}`)).toEqual(['pending', 'failure']);
    const failure = github.commitStatuses.find((c) => c.sha === broken.after && c.body.state === 'failure')!;
    expect(String(failure.body.description)).toMatch(/^Build failed/);
    expect(String(failure.body.description).length).toBeLessThanOrEqual(140);
  });

  it('waits out 503s and a rate limit, survives a kill -9, and still sends every state once and in order', async () => {
    const deployment = await create(uniqueName('outage'));
    // GitHub is down for the first calls, then asks for a pause.
    github.fail({ method: 'POST', path: /^\/repos\//, status: 503, times: 3 });
    github.fail({
      method: 'POST',
      path: /^\/repos\//,
      status: 403,
      times: 1,
      headers: { 'retry-after': '1' },
      body: { message: 'You have exceeded a secondary rate limit.', documentation_url: 'https://docs.github.com' },
    });
    const during = await push(deployment.id);
    await revisionReaches(api, deployment.id, during.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    expect(deploymentStates(during.after, deployment.name)).toEqual([['in_progress', 'success']]);
    expect(commitStates(during.after, `deploy/${deployment.name}`)).toEqual(['pending', 'success']);

    // Down again; the server is killed while the revision's statuses wait in the outbox.
    github.fail({ method: 'POST', path: /^\/repos\//, status: 503, times: 1_000_000 });
    const killed = await push(deployment.id);
    await revisionReaches(api, deployment.id, killed.revision.id, ['DEPLOYED'], 30_000);
    await server.kill('SIGKILL');
    github.clearFaults();
    server = await server.restart(env());
    api = apiClient(server.url, server.apiKey);
    await outboxDrained();
    expect(deploymentStates(killed.after, deployment.name)).toEqual([['in_progress', 'success']]);
    expect(commitStates(killed.after, `deploy/${deployment.name}`)).toEqual(['pending', 'success']);
    expect(deploymentStates(during.after, deployment.name)).toEqual([['in_progress', 'success', 'inactive']]);
    expect(github.problems()).toEqual([]);
  });

  it('waits at least a minute after a secondary-limit 403 that names no time, then sends it', async () => {
    const deployment = await create(uniqueName('limited'));
    // The creation's own statuses go first, so the limit falls on the push's first call.
    await outboxDrained();
    // GitHub's bare secondary-limit answer: a 403, no retry-after, no x-ratelimit-* headers.
    github.fail({
      method: 'POST',
      path: /^\/repos\//,
      status: 403,
      times: 1,
      body: {
        message: 'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
        documentation_url: 'https://docs.github.com',
      },
    });
    const limitedAt = Date.now();
    const limited = await push(deployment.id);
    await revisionReaches(api, deployment.id, limited.revision.id, ['DEPLOYED'], 30_000);
    const sql = serverSql(server);
    try {
      // Kept, not dropped, and not due for at least a minute after GitHub's answer.
      const waiting = await eventually(async () => {
        const rows = await sql.all<{ next_attempt_at: string | null; outcome: string | null }>(
          "SELECT next_attempt_at, outcome FROM github_outbox WHERE done_at IS NULL AND outcome LIKE 'retry:%' ORDER BY id LIMIT 1",
        );
        return rows[0]?.outcome?.startsWith('retry:') ? rows[0] : undefined;
      }, 20_000);
      expect(Date.parse(waiting.next_attempt_at!)).toBeGreaterThanOrEqual(limitedAt + 60_000);
      expect(waiting.outcome).toContain('secondary rate limit');
      expect(server.output()).not.toContain('GitHub refused a status; it is dropped');
      // The minute passes (moved into the past rather than waited for, with the server stopped so that it
      // defers nothing more meanwhile; a restart forgets the in-memory pause): it lands.
      await server.kill('SIGTERM');
      await sql.run('UPDATE github_outbox SET next_attempt_at = ? WHERE done_at IS NULL', new Date(Date.now() - 1000).toISOString());
    } finally {
      await sql.close();
    }
    server = await server.restart(env());
    api = apiClient(server.url, server.apiKey);
    await outboxDrained();
    expect(deploymentStates(limited.after, deployment.name)).toEqual([['in_progress', 'success']]);
    expect(commitStates(limited.after, `deploy/${deployment.name}`)).toEqual(['pending', 'success']);
    expect(github.problems()).toEqual([]);
  });

  it('never sends a call twice when the server dies after GitHub took it but before it heard the answer, even when its first look at GitHub fails', async () => {
    // A branch of its own, the creation's statuses sent: the push reaches this deployment alone, and the
    // slowed call is its revision's (after other cases, a push to main makes a revision in each of theirs).
    const deployment = await create(uniqueName('midcall'), 'midcall');
    await outboxDrained();
    // GitHub creates the deployment, but the answer comes too late for this server.
    github.slow({ method: 'POST', path: /\/deployments$/, delayMs: 60_000 });
    const cut = await push(deployment.id, 'refs/heads/midcall');
    const made = () => github.deployments.filter((d) => (d.body.payload as { revision_id?: string } | undefined)?.revision_id === cut.revision.id);
    await eventually(async () => (made().length > 0 ? true : undefined), 20_000, 50);
    await server.kill('SIGKILL');
    github.clearFaults();
    const callsBefore = github.exchanges.length;
    // The restarted server's first look at GitHub's list of deployments fails: it must look again, not create again.
    github.fail({ method: 'GET', path: /\/deployments$/, status: 503, times: 1 });
    server = await server.restart(env());
    api = apiClient(server.url, server.apiKey);
    await revisionReaches(api, deployment.id, cut.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    const lists = github.exchanges.slice(callsBefore).filter((e) => e.method === 'GET' && /\/deployments$/.test(e.path));
    expect(lists.map((e) => e.status)).toEqual([503, 200]);
    // One GitHub deployment for the revision, found again by the revision id in its payload, with each state once.
    expect(made()).toHaveLength(1);
    expect(deploymentStates(cut.after, deployment.name)).toEqual([['in_progress', 'success']]);
    expect(commitStates(cut.after, `deploy/${deployment.name}`)).toEqual(['pending', 'success']);
    expect(github.problems()).toEqual([]);
  });

  it("marks a prod deployment's replaced GitHub deployment inactive itself (auto_inactive is for non-production environments)", async () => {
    const deployment = await create(uniqueName('prod'), 'release', [], 'prod');
    const first = await push(deployment.id, 'refs/heads/release');
    await revisionReaches(api, deployment.id, first.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    const second = await push(deployment.id, 'refs/heads/release');
    await revisionReaches(api, deployment.id, second.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    expect(github.deployments.find((d) => d.body.ref === second.after)?.body).toMatchObject({ production_environment: true });
    expect(github.deployments.find((d) => d.body.ref === second.after)?.statuses.at(-1)).toMatchObject({ state: 'success', auto_inactive: false });
    expect(deploymentStates(first.after, deployment.name)).toEqual([['in_progress', 'success', 'inactive']]);
    const inactive = github.deployments.find((d) => d.body.ref === first.after)!.statuses.at(-1)!;
    expect(inactive.added_by).toBeUndefined();
  });

  it("logs and drops a status past GitHub's cap of statuses per commit and context", async () => {
    const deployment = await create(uniqueName('capped'));
    github.statusCap = 1;
    try {
      const capped = await push(deployment.id);
      await revisionReaches(api, deployment.id, capped.revision.id, ['DEPLOYED'], 30_000);
      await outboxDrained();
      // pending was kept, success was refused (422) and dropped: the deployment's own statuses still went.
      expect(commitStates(capped.after, `deploy/${deployment.name}`)).toEqual(['pending']);
      expect(deploymentStates(capped.after, deployment.name)).toEqual([['in_progress', 'success']]);
      expect(server.output()).toContain('GitHub keeps no more statuses for this commit and context');
    } finally {
      github.statusCap = 1000;
    }
  });
});
