import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, eventually } from '../helpers/api.ts';
import { revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import type { ServerProcess } from '../helpers/server-process.ts';
import { deliver, processedDelivery, revisionsOf } from '../webhooks/github.ts';
import { createBuiltOnPush, outboxDrained as outboxDrainedOf, pushCommit, startGithubScene } from './scene.ts';
import { serverSql } from './sql.ts';
import type { GithubStandIn } from './stand-in.ts';

const SECRET = 'check-runs-secret';

/**
 * Contract §19, "Checks": where the installation grants `checks: write`, each revision is one
 * check run `deploy/<name>` (queued → in_progress → completed, a Markdown summary with the status,
 * the URL and the last 50 log lines) instead of commit statuses, and GitHub's "Re-run"
 * (`check_run.rerequested`) redeploys the revision. Every request checked against GitHub's description.
 */
describe('check runs', () => {
  let github: GithubStandIn;
  let server: ServerProcess;
  let api: Api;
  let installation: number;
  let integrationId: string;
  const repoUrl = () => `${github.url}/acme/checked`;

  beforeAll(async () => {
    ({ github, server, api, installation, integrationId } = await startGithubScene({
      repos: ['acme/checked'],
      permissions: { contents: 'read', metadata: 'read', deployments: 'write', statuses: 'write', checks: 'write', pull_requests: 'read' },
      env: { GITHUB_WEBHOOK_SECRET: SECRET, RECONCILE_INTERVAL_MS: '0' },
    }));
  });

  afterAll(async () => {
    await server?.kill('SIGTERM');
    await github?.stop();
  });

  const outboxDrained = () => outboxDrainedOf(server);
  const create = async (name: string, secrets: Array<{ name: string; value: string }> = []) => {
    const created = await createBuiltOnPush({ api, github, integrationId }, name, 'acme/checked', { secrets });
    await outboxDrained();
    return created;
  };
  /** The check runs of one deployment on one commit (a push builds every deployment of the repository, each with its own). */
  const runsOf = (deployment: { name: string }, after: string) =>
    github.checkRuns.filter((r) => r.fields.head_sha === after && r.fields.name === `deploy/${deployment.name}`);
  const push = (deploymentId: string) => pushCommit({ api, github, installation, server }, SECRET, deploymentId, 'acme/checked');

  it('reports a revision as one check run deploy/<name> with a Markdown summary, and no commit statuses', async () => {
    const deployment = await create(uniqueName('checked'));
    // The first push mints the sender's token (kept until shortly before it expires) and is replaced by the second.
    const first = await push(deployment.id);
    await revisionReaches(api, deployment.id, first.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    const callsBefore = github.exchanges.length;
    const pushed = await push(deployment.id);
    await revisionReaches(api, deployment.id, pushed.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    // Every request the server made to GitHub for the push: five (the check run tells the build's progress,
    // the deployment its creation and outcome; GitHub's auto_inactive retires the replaced one).
    const calls = github.exchanges.slice(callsBefore).map((e) => `${e.method} ${e.template}`);
    expect(calls).toEqual([
      'POST /repos/{owner}/{repo}/deployments',
      'POST /repos/{owner}/{repo}/check-runs',
      'PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}',
      'POST /repos/{owner}/{repo}/deployments/{deployment_id}/statuses',
      'PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}',
    ]);
    const replaced = github.deployments.filter((d) => d.body.ref === first.after);
    expect(replaced.map((d) => d.statuses.map((s) => s.state))).toEqual([['success', 'inactive']]);
    const runs = runsOf(deployment, pushed.after);
    expect(runs).toHaveLength(1);
    const run = runs[0]!;
    expect(run.fields).toMatchObject({ name: `deploy/${deployment.name}`, external_id: pushed.revision.id, status: 'completed', conclusion: 'success' });
    expect(String(run.fields.details_url)).toMatch(new RegExp(`/console/deployments/${deployment.id}/revisions/${pushed.revision.id}$`));
    expect(run.updates.map((u) => u.status)).toEqual(['queued', 'in_progress', 'completed']);
    const output = run.fields.output as { title: string; summary: string };
    expect(output.title).toBe('Deployed');
    expect(output.summary).toContain('**Status:** Deployed');
    expect(output.summary).toContain(deployment.source_config.custom_url);
    expect(output.summary).toContain('**Last 50 log lines**');
    // The sandbox data plane's own build lines, as the revision's log has them.
    const logs = (await api.get(`/v2/deployments/${deployment.id}/revisions/${pushed.revision.id}/logs?type=build&limit=5`)).body.logs as Array<{
      message: string;
    }>;
    expect(logs.length).toBeGreaterThan(0);
    expect(output.summary).toContain(logs[0]!.message);
    expect(github.commitStatuses.filter((c) => c.sha === pushed.after)).toEqual([]);
    // The GitHub deployment is still made, with its statuses.
    expect(github.deployments.find((d) => d.body.ref === pushed.after)?.statuses.map((s) => s.state)).toEqual(['success']);
    expect(github.problems()).toEqual([]);
  });

  it('concludes failure for a failed build', async () => {
    const deployment = await create(uniqueName('checkfail'), [{ name: 'SANDBOX_FAIL_STAGE', value: 'build' }]);
    const pushed = await push(deployment.id);
    await revisionReaches(api, deployment.id, pushed.revision.id, ['BUILD_FAILED'], 30_000);
    await outboxDrained();
    const run = runsOf(deployment, pushed.after)[0]!;
    expect(run.fields).toMatchObject({ status: 'completed', conclusion: 'failure' });
    expect((run.fields.output as { summary: string }).summary).toContain('Build failed');
  });

  it("redeploys the revision on GitHub's Re-run (check_run.rerequested), as a new revision with its own check run", async () => {
    const deployment = await create(uniqueName('rerun'));
    const pushed = await push(deployment.id);
    await revisionReaches(api, deployment.id, pushed.revision.id, ['DEPLOYED'], 30_000);
    await outboxDrained();
    const run = runsOf(deployment, pushed.after)[0]!;
    const rerequested = {
      action: 'rerequested',
      check_run: { id: run.id, name: run.fields.name, head_sha: pushed.after, external_id: run.fields.external_id, status: 'completed', conclusion: 'success' },
      repository: { full_name: 'acme/checked', html_url: repoUrl() },
      installation: { id: installation },
      sender: { login: 'alice' },
    };
    const delivered = await deliver(server.url, 'check_run', rerequested, { secret: SECRET });
    expect(delivered.status).toBe(202);
    const entry = await processedDelivery(api, delivered.id);
    const created = entry.results.find((r: { result: string }) => r.result === 'revision_created');
    expect(created, JSON.stringify(entry)).toBeDefined();
    const again = await revisionReaches(api, deployment.id, created.revision_id, ['DEPLOYED'], 30_000);
    expect(again.id).not.toBe(pushed.revision.id);
    expect(again.source_revision_config.repo_commit_sha).toBe(pushed.after);
    await outboxDrained();
    // Its own check run on the same commit.
    const runs = runsOf(deployment, pushed.after);
    expect(runs.map((r) => r.fields.external_id).sort()).toEqual([pushed.revision.id, again.id].sort());
    // The Re-run is audited as the delivery's (contract §17), on the revision re-run, as an API redeploy is.
    const audited = (await api.get(`/v1/audit-events?resource_id=${pushed.revision.id}`)).body.resources;
    expect(audited).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ actor_kind: 'github_delivery', actor_id: delivered.id, action: 'redeploy', resource_type: 'revision', outcome: 'succeeded' }),
      ]),
    );

    // Another installation's delivery naming this revision redeploys nothing.
    // (No workspace is linked to that installation, so no workspace's delivery log shows it: read the server's table.)
    const stranger = await deliver(server.url, 'check_run', { ...rerequested, installation: { id: 999_999 } }, { secret: SECRET });
    expect(stranger.status).toBe(202);
    const sql = serverSql(server);
    try {
      const processed = await eventually(async () => {
        const [row] = await sql.all<{ status: string; summary: string | null }>('SELECT status, summary FROM webhook_deliveries WHERE delivery_id = ?', [
          stranger.id,
        ]);
        return row && row.status !== 'pending' ? row : undefined;
      });
      expect(processed.status, JSON.stringify(processed)).not.toBe('failed');
      expect(await sql.all('SELECT * FROM webhook_delivery_results WHERE delivery_id = ?', [stranger.id])).toEqual([]);
    } finally {
      await sql.close();
    }
    expect((await revisionsOf(api, deployment.id)).filter((r) => r.source_revision_config.repo_commit_sha === pushed.after)).toHaveLength(2);
    expect(github.problems()).toEqual([]);
  });
});
