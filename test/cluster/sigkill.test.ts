import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';

/** Each simulated stage (build, deploy) lasts this long: long enough to kill a process in the middle of one. */
const STAGE_MS = 1500;
/** The lease a process holds on a revision it works on (branch `leases`); another takes over once it lapses. */
const LEASE_MS = 2000;
const DEPLOYMENTS = 6;
const MID_PIPELINE = new Set(['AWAITING_BUILD', 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING']);

describe('SIGKILL of a process with revisions mid-pipeline (contract §5, §10)', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await startCluster({ SANDBOX_STAGE_MS: String(STAGE_MS), PIPELINE_LEASE_MS: String(LEASE_MS), RECONCILE_INTERVAL_MS: '0' });
  });
  afterAll(async () => {
    await cluster?.stopAll();
  });

  it('every revision still reaches DEPLOYED through the other processes within a few lease lengths', async () => {
    const victim = cluster.api(0);
    const fx = await workspaceFixtures(victim);
    const created = await Promise.all(
      Array.from({ length: DEPLOYMENTS }, () => victim.post('/v2/deployments', githubBody(uniqueName('kill'), fx.integrationId))),
    );
    for (const c of created) expect(c.status).toBe(201);
    const revisions = created.map((c) => ({ deploymentId: c.body.id as string, revisionId: c.body.latest_revision_id as string }));
    const statuses = async (via = cluster.api(1)) =>
      Promise.all(revisions.map(async (r) => (await via.get(`/v2/deployments/${r.deploymentId}/revisions/${r.revisionId}`)).body.status as string));

    // Kill it while every revision is mid-pipeline (building or deploying), none ended.
    await eventually(async () => ((await statuses()).every((s) => MID_PIPELINE.has(s)) ? true : undefined), 3 * STAGE_MS, 20);
    const atKill = await statuses();
    await cluster.kill(0, 'SIGKILL');
    expect(
      atKill.every((s) => MID_PIPELINE.has(s)),
      atKill.join(', '),
    ).toBe(true);

    // Within a few lease lengths (plus the stages still to run), the other two processes have
    // finished every one of them. Polled through both survivors in turn.
    const deadline = 4 * LEASE_MS + 4 * STAGE_MS + 5000;
    let last: string[] = [];
    const ended = await eventually(
      async () => {
        last = await statuses(cluster.random());
        return last.every((s) => s === 'DEPLOYED') ? last : undefined;
      },
      deadline,
      100,
    ).catch(() => last);
    expect(ended, `statuses ${deadline} ms after the SIGKILL (at the kill: ${atKill.join(', ')})`).toEqual(revisions.map(() => 'DEPLOYED'));
    for (const r of revisions) {
      const deployment = await cluster.random().get(`/v2/deployments/${r.deploymentId}`);
      expect(deployment.body).toMatchObject({ status: 'READY', active_revision_id: r.revisionId });
    }
  });
});
