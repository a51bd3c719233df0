import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { uniqueName } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { runAction, startAction } from './harness.ts';

/**
 * Revisions on a `k8s` listener wait in AWAITING_DEPLOY until a listener agent claims them, and
 * none does here: so a test can act while a revision is on its way, with no race against a timer.
 */
describe('the bundled Action while revisions are on their way', () => {
  let server: ServerProcess;
  let api: Api;
  let k8sListener: string;
  const inputs = (name: string, image: string) => ({ 'api-url': server.url, 'api-key': server.apiKey, name, 'image-uri': image, 'listener-id': k8sListener });

  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '50' });
    api = apiClient(server.url, server.apiKey);
    const listener = await api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `cluster-${crypto.randomUUID()}`,
      compute_config: { k8s_license_secret: 'langgraph-license' },
    });
    expect(listener.status).toBe(201);
    k8sListener = listener.body.id;
  });
  afterAll(async () => {
    await server?.kill();
  });

  const revisionOf = async (deploymentId: string, revisionId: string) => (await api.get(`/v2/deployments/${deploymentId}/revisions/${revisionId}`)).body;

  it('fails when its revision is superseded, and names the newer revision', async () => {
    const name = uniqueName('sup');
    const created = await api.post('/v2/deployments', {
      name,
      source: 'external_docker',
      source_config: { listener_id: k8sListener },
      source_revision_config: { image_uri: 'img:1' },
    });
    expect(created.status).toBe(201);
    const deploymentId = created.body.id as string;
    const first = created.body.latest_revision_id as string;

    // The run PATCHes: its revision queues behind the first, which waits for a listener agent.
    const started = startAction(inputs(name, 'img:2'));
    const ours = await eventually(async () => {
      const deployment = await api.get(`/v2/deployments/${deploymentId}`);
      return deployment.body.latest_revision_id !== first ? (deployment.body.latest_revision_id as string) : undefined;
    });
    await eventually(async () => started.outputs().status);
    // A newer revision queues too; when the first ends, the newest starts and the run's is SKIPPED.
    const newer = await api.patch(`/v2/deployments/${deploymentId}`, { source_revision_config: { image_uri: 'img:3' } });
    const newerId = newer.body.latest_revision_id as string;
    expect(newerId).not.toBe(ours);
    expect((await api.post(`/v2/deployments/${deploymentId}/revisions/${first}/interrupt`)).status).toBe(200);

    const run = await started.done;
    expect(run.code, run.stdout + run.stderr).toBe(1);
    expect(run.outputs['revision-id']).toBe(ours);
    expect(run.outputs.status).toBe('SKIPPED');
    expect(run.stdout).toContain(`superseded by the newer revision ${newerId}`);
    expect(run.summary).toContain('Superseded by');
    expect(run.summary).toContain(newerId);
    expect((await revisionOf(deploymentId, ours)).status).toBe('SKIPPED');
  });

  it('with wait: false, returns right after the request, with the revision still on its way', async () => {
    const run = await runAction({ ...inputs(uniqueName('nowait'), 'img:1'), wait: 'false' });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(['QUEUED', 'AWAITING_DEPLOY']).toContain(run.outputs.status);
    expect((await revisionOf(run.outputs['deployment-id']!, run.outputs['revision-id']!)).status).toBe('AWAITING_DEPLOY');
    expect(run.summary).toContain('not waited for');
  });

  it('fails when the wait times out, with the last status', async () => {
    const run = await runAction({ ...inputs(uniqueName('slow'), 'img:1'), 'wait-timeout': '1s' });
    expect(run.code).toBe(1);
    expect(run.outputs.status).toBe('AWAITING_DEPLOY');
    expect(run.stdout).toMatch(/::error::Revision [0-9a-f-]{36} did not reach DEPLOYED within 1s; its last status was AWAITING_DEPLOY/);
    expect(run.summary).toContain('Timed out');
  });

  it('on SIGTERM writes the summary and outputs, interrupts the revision with cancel-on-abort, and exits', async () => {
    const started = startAction({ ...inputs(uniqueName('cancel'), 'img:1'), 'cancel-on-abort': 'true' });
    const revisionId = await eventually(async () => started.outputs()['revision-id']);
    await eventually(async () => started.outputs().status); // the wait is under way
    started.child.kill('SIGTERM');
    const run = await started.done;
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('Received SIGTERM');
    expect(run.outputs['revision-id']).toBe(revisionId);
    expect(run.outputs.status).toBe('INTERRUPTED');
    expect(run.summary).toContain('Cancelled');
    expect((await revisionOf(run.outputs['deployment-id']!, revisionId)).status).toBe('INTERRUPTED');
  });

  it('on SIGINT without cancel-on-abort leaves the revision as it is', async () => {
    const started = startAction(inputs(uniqueName('leave'), 'img:1'));
    const revisionId = await eventually(async () => started.outputs()['revision-id']);
    await eventually(async () => started.outputs().status);
    started.child.kill('SIGINT');
    const run = await started.done;
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('Received SIGINT');
    expect(run.summary).toContain('Cancelled');
    expect((await revisionOf(run.outputs['deployment-id']!, revisionId)).status).toBe('AWAITING_DEPLOY');
  });
});
