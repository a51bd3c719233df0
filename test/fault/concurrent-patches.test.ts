import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { expectQueueRanOneAtATime } from '../helpers/queue-history.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const TERMINAL = new Set(['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'CREATE_FAILED', 'SKIPPED', 'INTERRUPTED']);
/** Statuses of a revision the data plane is working on (QUEUED waits; terminal ones have ended). */
const IN_PROGRESS = new Set(['CREATING', 'AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING']);

type RevisionView = { id: string; status: string; created_at: string; updated_at: string };

describe('50 concurrent PATCHes to one deployment', () => {
  let server: ServerProcess;
  let api: Api;

  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '40' });
    api = apiClient(server.url, server.apiKey);
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('creates 50 revisions, runs one at a time, deploys the newest and skips or deploys the rest', async () => {
    const fx = await workspaceFixtures(api);
    const created = await api.post('/v2/deployments', dockerBody(uniqueName('conc'), fx.listenerId));
    expect(created.status).toBe(201);
    const deploymentId = created.body.id as string;
    const listPath = `/v2/deployments/${deploymentId}/revisions?limit=100`;

    // Sample the revision list without pause while the PATCHes land and the queue drains.
    let sampling = true;
    let samples = 0;
    let worst = 0;
    const sampler = (async () => {
      while (sampling) {
        const page = await api.get<{ resources: RevisionView[] }>(listPath);
        const running = page.body.resources.filter((r) => IN_PROGRESS.has(r.status)).length;
        worst = Math.max(worst, running);
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
    }, 30_000);
    sampling = false;
    await sampler;

    // 1 revision from the create + 50 from the PATCHes, each PATCH naming a different one.
    expect(final).toHaveLength(51);
    const fromPatches = new Set(patches.map((p) => p.body.latest_revision_id as string));
    expect(fromPatches.size).toBe(50);
    for (const id of fromPatches) expect(final.map((r) => r.id)).toContain(id);

    expect(samples).toBeGreaterThan(5);
    expect(worst).toBeLessThanOrEqual(1);

    // Newest first: the newest DEPLOYED and live, the others DEPLOYED or SKIPPED, and those that ran never overlapping.
    await expectQueueRanOneAtATime(api, deploymentId, final);
    // Skipped ones never reached the data plane.
    for (const revision of final.filter((r) => r.status === 'SKIPPED').slice(0, 5)) {
      const logs = await api.get<{ logs: unknown[] }>(`/v2/deployments/${deploymentId}/revisions/${revision.id}/logs?type=deploy`);
      expect(logs.body.logs).toHaveLength(0);
    }
  });
});
