import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { expectQueueRanOneAtATime } from '../helpers/queue-history.ts';

const TERMINAL = new Set(['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'CREATE_FAILED', 'SKIPPED', 'INTERRUPTED']);
/** Statuses of a revision the data plane is working on (QUEUED waits; terminal ones have ended). */
const IN_PROGRESS = new Set(['CREATING', 'AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING']);

type RevisionView = { id: string; status: string; updated_at: string };

describe('50 concurrent PATCHes spread over three processes (contract §5, §10)', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await startCluster({ SANDBOX_STAGE_MS: '150', RECONCILE_INTERVAL_MS: '0', PIPELINE_LEASE_MS: '2000' });
  });
  afterAll(async () => {
    await cluster?.stopAll();
  });

  it('leave one revision in progress at a time, the newest DEPLOYED and the rest skipped or deployed', async () => {
    const api = cluster.random();
    const fx = await workspaceFixtures(api);
    const created = await api.post('/v2/deployments', dockerBody(uniqueName('cluster-conc'), fx.listenerId));
    expect(created.status).toBe(201);
    const deploymentId = created.body.id as string;
    const listPath = `/v2/deployments/${deploymentId}/revisions?limit=100`;

    // Sample the revision list without pause, from every process in turn, while the PATCHes land and the queue drains.
    let sampling = true;
    let samples = 0;
    let samplesWithOneRunning = 0;
    let worst: RevisionView[] = [];
    const sampler = (async () => {
      while (sampling) {
        const page = await api.get<{ resources: RevisionView[] }>(listPath);
        const running = page.body.resources.filter((r) => IN_PROGRESS.has(r.status));
        if (running.length > worst.length) worst = running;
        if (running.length === 1) samplesWithOneRunning += 1;
        samples += 1;
      }
    })();

    const patches = await Promise.all(
      Array.from({ length: 50 }, (_, i) => api.patch(`/v2/deployments/${deploymentId}`, { secrets: [{ name: 'ATTEMPT', value: String(i) }] })),
    );
    for (const patch of patches) expect(patch.status).toBe(200);

    const final = await eventually(async () => {
      const page = await api.get<{ resources: RevisionView[] }>(listPath);
      return page.body.resources.every((r) => TERMINAL.has(r.status)) ? page.body.resources : undefined;
    }, 45_000).finally(() => (sampling = false));
    await sampler;

    // 1 revision from the create + 50 from the PATCHes, each PATCH naming a different one.
    expect(final).toHaveLength(51);
    const fromPatches = new Set(patches.map((p) => p.body.latest_revision_id as string));
    expect(fromPatches.size).toBe(50);

    expect(samples).toBeGreaterThan(5);
    // The sampler did see the pipeline at work (a run that only saw the end would prove nothing).
    expect(samplesWithOneRunning).toBeGreaterThan(0);
    // Never two at once: the sample with the most revisions in progress names them if it had more than one.
    expect(worst.map((r) => `${r.id} ${r.status}`)).toHaveLength(Math.min(worst.length, 1));

    // Newest first: the newest DEPLOYED and live, the others DEPLOYED or SKIPPED, and those that ran never overlapping.
    await expectQueueRanOneAtATime(api, deploymentId, final);
  });
});
