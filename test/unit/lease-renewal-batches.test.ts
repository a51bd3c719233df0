import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * A process renews the leases of every revision it runs. SQLite's writes hold the event loop, so one
 * UPDATE over all of them (20,000 held at BUILDING in the benchmark) stopped every request for
 * ~180 ms at each renewal; the renewal goes in batches of at most 500, with requests let in between.
 */
describe('lease renewal of many revisions', () => {
  it('renews 1,100 held revisions in statements of at most 500, and renews every one of them', { timeout: 120_000 }, async () => {
    const t = await inProcessApp({ stageMs: 3_600_000, env: { PIPELINE_LEASE_MS: '300' } });
    try {
      const batches: number[] = [];
      const renew = t.store.renewRevisionLeases.bind(t.store);
      t.store.renewRevisionLeases = async (ids, lease) => {
        batches.push(ids.length);
        return renew(ids, lease);
      };
      const fx = await workspaceFixtures(t.api);
      for (let i = 0; i < 1100; i += 1) {
        const created = await t.api.post('/v2/deployments', githubBody(uniqueName('held'), fx.integrationId));
        expect(created.status).toBe(201);
      }
      // A renewal after the last create covers all 1,100 (the last one's lease may still be the one it started with).
      batches.length = 0;
      const startedAt = new Date().toISOString();
      await eventually(async () => (batches.reduce((a, b) => a + b, 0) >= 2200 ? true : undefined), 30_000);
      expect(Math.max(...batches)).toBeLessThanOrEqual(500);
      expect(batches.filter((n) => n === 500).length).toBeGreaterThanOrEqual(4);
      const stale = await t.sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM revisions WHERE status = 'BUILDING' AND (lease_expires_at IS NULL OR lease_expires_at < ?)", startedAt);
      const held = await t.sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM revisions WHERE status = 'BUILDING'");
      expect(Number(held!.n)).toBe(1100);
      expect(Number(stale!.n)).toBe(0);
    } finally {
      await t.close();
    }
  });
});
