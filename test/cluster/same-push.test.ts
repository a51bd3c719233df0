import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Api } from '../helpers/api.ts';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { workspaceFixtures } from '../helpers/fixtures.ts';
import { deliver, processedDelivery, pushPayload, revisionsOf } from '../webhooks/github.ts';
import { pushDeployment } from '../webhooks/shared-setup.ts';

const SECRET = 'cluster-webhook-secret';
/** Pushes raced at once (each to its own repository and deployment): more chances for a race to show. */
const PUSHES = 4;

type Result = { deployment_id: string; result: string; revision_id: string | null; reason: string | null };

describe('the same push delivered to three processes under six delivery ids (contract §7, §10)', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await startCluster({ GITHUB_WEBHOOK_SECRET: SECRET, SANDBOX_STAGE_MS: '100', RECONCILE_INTERVAL_MS: '0', PIPELINE_LEASE_MS: '2000' });
  });
  afterAll(async () => {
    await cluster?.stopAll();
  });

  /** One push, six deliveries of the same signed bytes (as GitHub's redeliveries make), two to each process, all at once. */
  async function racePush(api: Api, integrationId: string, installationId: number, n: number) {
    const repo = `acme/cluster-${Date.now().toString(36)}-${n}`;
    const deployment = await pushDeployment(api, integrationId, `https://github.com/${repo}`);
    const payload = pushPayload({ repo, installationId });
    const body = JSON.stringify(payload);
    const deliveries = await Promise.all(
      Array.from({ length: 6 }, (_, i) => deliver(cluster.processes[i % 3]!.url, 'push', payload, { secret: SECRET, body })),
    );
    return { deployment, payload, deliveries };
  }

  it('makes exactly one revision for the commit, and each delivery is processed once', async () => {
    const api = cluster.random();
    const fx = await workspaceFixtures(api);
    const pushes = await Promise.all(Array.from({ length: PUSHES }, (_, n) => racePush(api, fx.integrationId, fx.installationId, n)));

    for (const { deployment, payload, deliveries } of pushes) {
      for (const delivery of deliveries) expect(delivery.status).toBe(202);
      expect(new Set(deliveries.map((d) => d.id)).size).toBe(6);

      // Every delivery is processed (by whichever process) ...
      const entries = await Promise.all(deliveries.map((d) => processedDelivery(api, d.id, 30_000)));
      const summary = JSON.stringify(entries.map((e) => [e.outcome, ...(e.results as Result[]).map((r) => `${r.result}: ${r.reason}`)]));
      // ... once: a delivery processed twice records the deployment twice, or has its first result
      // (the revision it made) overwritten by the second run's "already has a revision".
      for (const entry of entries)
        expect(
          (entry.results as Result[]).map((r) => r.deployment_id),
          summary,
        ).toEqual([deployment.id]);
      const made = entries.flatMap((e) => (e.results as Result[]).filter((r) => r.result === 'revision_created'));
      expect(made, summary).toHaveLength(1);

      // One revision of that commit.
      const revisions = (await revisionsOf(api, deployment.id)).filter((r) => r.trigger === 'push');
      expect(revisions.map((r) => r.source_revision_config.repo_commit_sha)).toEqual([payload.after]);
      expect(revisions[0].id).toBe(made[0]!.revision_id);
    }
  });
});
