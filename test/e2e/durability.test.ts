import { afterAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api.ts';
import { dockerBody, githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const TERMINAL = ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'CREATE_FAILED', 'SKIPPED', 'INTERRUPTED'];

describe('durability across SIGKILL', () => {
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill('SIGKILL');
  });

  it('resumes every revision that was mid-pipeline, and loses nothing acknowledged', async () => {
    // Slow stages so the kill lands while revisions are queued, building and deploying. On
    // PostgreSQL the restarted process cannot tell the killed one from a live one until its leases
    // pass (another process may be running that work): a short lease keeps this test short.
    const first = await startServerProcess({ SANDBOX_STAGE_MS: '1500', PIPELINE_LEASE_MS: '1000' });
    servers.push(first);
    const api = apiClient(first.url, first.apiKey);
    const fx = await workspaceFixtures(api);

    const acknowledged: Array<{ deploymentId: string; revisionId: string }> = [];
    for (let i = 0; i < 4; i += 1) {
      const created = await api.post(
        '/v2/deployments',
        i % 2 === 0 ? githubBody(uniqueName('dur'), fx.integrationId) : dockerBody(uniqueName('dur'), fx.listenerId),
      );
      expect(created.status).toBe(201);
      acknowledged.push({ deploymentId: created.body.id, revisionId: created.body.latest_revision_id });
      // A second revision queues behind the first.
      const patched = await api.patch(`/v2/deployments/${created.body.id}`, { secrets: [{ name: 'N', value: String(i) }] });
      expect(patched.status).toBe(200);
      acknowledged.push({ deploymentId: created.body.id, revisionId: patched.body.latest_revision_id });
    }
    const midway = await api.get(`/v2/deployments/${acknowledged[0]!.deploymentId}/revisions/${acknowledged[0]!.revisionId}`);
    expect(TERMINAL).not.toContain(midway.body.status);

    await first.kill('SIGKILL');
    const second = await first.restart({ SANDBOX_STAGE_MS: '50' });
    servers.push(second);
    const after = apiClient(second.url, second.apiKey);

    for (const { deploymentId, revisionId } of acknowledged) {
      const revision = await revisionReaches(after, deploymentId, revisionId, TERMINAL);
      expect(revision.id).toBe(revisionId);
    }
    // The newest revision of each deployment ends DEPLOYED; the deployment is READY with it active.
    for (const { deploymentId, revisionId } of acknowledged.filter((_, i) => i % 2 === 1)) {
      const revision = await revisionReaches(after, deploymentId, revisionId, ['DEPLOYED']);
      expect(revision.status).toBe('DEPLOYED');
      const deployment = await after.get(`/v2/deployments/${deploymentId}`);
      expect(deployment.body).toMatchObject({ status: 'READY', active_revision_id: revisionId, latest_revision_id: revisionId });
    }
    // At start (SQLite: leases left in the file are expired when it opens), or by the first sweep after the lease (PostgreSQL).
    expect(second.output()).toMatch(/resumed work left by the previous run|took over work whose process stopped renewing its lease/);
  });
});
