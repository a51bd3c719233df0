import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually, type Api } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { startServerProcess, type ServerProcess } from '../helpers/server-process.ts';
import { runAction, startAction } from './harness.ts';

// Slow stages (1.5 s each), so a test can act while a revision is still on its way.
describe('the bundled Action while revisions take their time', () => {
  let server: ServerProcess;
  let api: Api;
  let fx: Awaited<ReturnType<typeof workspaceFixtures>>;
  const base = () => ({ 'api-url': server.url, 'api-key': server.apiKey });
  const github = (name: string) => ({ ...base(), name, 'repo-url': 'https://github.com/acme/agent', 'graph-config-path': 'langgraph.json', 'integration-id': fx.integrationId });

  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '1500' });
    api = apiClient(server.url, server.apiKey);
    fx = await workspaceFixtures(api);
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('fails when its revision is superseded, and names the newer revision', async () => {
    const name = uniqueName('sup');
    const created = await api.post('/v2/deployments', githubBody(name, fx.integrationId));
    expect(created.status).toBe(201);
    const first = created.body.latest_revision_id as string;

    // The run PATCHes: its revision queues behind the first one, which is building.
    const started = startAction({ ...github(name), 'repo-ref': 'release-2' });
    const ours = await eventually(async () => {
      const deployment = await api.get(`/v2/deployments/${created.body.id}`);
      return deployment.body.latest_revision_id !== first ? (deployment.body.latest_revision_id as string) : undefined;
    });
    // A newer revision queues too: when the first ends, the newest starts and the run's is SKIPPED.
    const newer = await api.patch(`/v2/deployments/${created.body.id}`, { source_revision_config: { repo_ref: 'release-3' } });
    expect(newer.status).toBe(200);
    const newerId = newer.body.latest_revision_id as string;
    expect(newerId).not.toBe(ours);

    const run = await started.done;
    expect(run.code, run.stdout + run.stderr).toBe(1);
    expect(run.outputs['revision-id']).toBe(ours);
    expect(run.outputs.status).toBe('SKIPPED');
    expect(run.stdout).toContain(`superseded by the newer revision ${newerId}`);
    expect(run.summary).toContain(newerId);
    expect(run.summary).toContain('Superseded by');
  });

  it('with wait: false, returns right after the request with the revision still on its way', async () => {
    const run = await runAction({ ...github(uniqueName('nowait')), wait: 'false' });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const { 'deployment-id': deploymentId, 'revision-id': revisionId, status } = run.outputs;
    expect(['QUEUED', 'AWAITING_BUILD', 'BUILDING']).toContain(status);
    // Still building when the step has already ended.
    const revision = await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}`);
    expect(['QUEUED', 'AWAITING_BUILD', 'BUILDING']).toContain(revision.body.status);
    expect(run.summary).toContain('not waited for');
  });

  it('on SIGTERM writes the summary and outputs, interrupts the revision with cancel-on-abort, and exits', async () => {
    const started = startAction({ ...github(uniqueName('cancel')), 'cancel-on-abort': 'true' });
    const revisionId = await eventually(async () => started.outputs()['revision-id']);
    // The wait is under way once a status has been seen.
    await eventually(async () => started.outputs().status);
    started.child.kill('SIGTERM');
    const run = await started.done;
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('Received SIGTERM');
    expect(run.outputs['revision-id']).toBe(revisionId);
    expect(run.outputs.status).toBe('INTERRUPTED');
    expect(run.summary).toContain('Cancelled');
    const revision = await api.get(`/v2/deployments/${run.outputs['deployment-id']}/revisions/${revisionId}`);
    expect(revision.body.status).toBe('INTERRUPTED');
  });

  it('on SIGINT without cancel-on-abort leaves the revision running', async () => {
    const started = startAction(github(uniqueName('leave')));
    const revisionId = await eventually(async () => started.outputs()['revision-id']);
    await eventually(async () => started.outputs().status);
    started.child.kill('SIGINT');
    const run = await started.done;
    expect(run.code).toBe(1);
    expect(run.summary).toContain('Cancelled');
    await revisionReaches(api, run.outputs['deployment-id']!, revisionId, ['DEPLOYED'], 20_000);
  });
});
