import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * A process's revisions are covered by its one process lease (issue 13): renewing it is one row
 * write however many revisions it runs. Revisions are written only once, when started here, to
 * name this process, in statements of at most 500 with requests let in between: SQLite's writes
 * hold the event loop, and one UPDATE over 20,000 revisions held at BUILDING (the benchmark's
 * shape) stopped every request for ~180 ms at each renewal.
 */
describe('lease renewal with many revisions held', () => {
  it('names 1,100 started revisions in statements of at most 500, then renews only the process lease', { timeout: 120_000 }, async () => {
    const t = await inProcessApp({ stageMs: 3_600_000, env: { PIPELINE_LEASE_MS: '1500' } });
    try {
      const batches: number[] = [];
      const hold = t.store.holdRevisions.bind(t.store);
      t.store.holdRevisions = async (ids, owner) => {
        batches.push(ids.length);
        return hold(ids, owner);
      };
      const fx = await workspaceFixtures(t.api);
      // Created while the renewals go on: each renewal names those started since the last one.
      for (let i = 0; i < 1100; i += 1) {
        const created = await t.api.post('/v2/deployments', githubBody(uniqueName('held'), fx.integrationId));
        expect(created.status).toBe(201);
      }
      const processId = (await t.sql.get<{ process_id: string }>('SELECT process_id FROM process_leases'))!.process_id;
      const heldBy = async () => Number((await t.sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM revisions WHERE status = 'BUILDING' AND runner_id = ?", processId))!.n);
      await eventually(async () => ((await heldBy()) === 1100 ? true : undefined), 30_000);
      expect(batches.reduce((a, b) => a + b, 0)).toBe(1100);
      expect(Math.max(...batches)).toBeLessThanOrEqual(500);
      // From now on a renewal writes the process lease alone: it moves on, and no revision is written.
      batches.length = 0;
      const leaseNow = async () => (await t.sql.get<{ lease_expires_at: string }>('SELECT lease_expires_at FROM process_leases WHERE process_id = ?', processId))!.lease_expires_at;
      const first = await leaseNow();
      await eventually(async () => ((await leaseNow()) > first ? true : undefined), 10_000);
      const second = await leaseNow();
      await eventually(async () => ((await leaseNow()) > second ? true : undefined), 10_000);
      expect(batches).toEqual([]);
      expect(await heldBy()).toBe(1100);
    } finally {
      await t.close();
    }
  });
});
