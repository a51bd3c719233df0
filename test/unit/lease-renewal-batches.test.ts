import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * A process's revisions are covered by its one process lease: renewing it is one row
 * write however many revisions it runs. A create names this process in its own write; a revision
 * started otherwise (a PATCH's, a push's) is written once more, at the next renewal, to name it,
 * in statements of at most 500 with requests let in between: SQLite's writes hold the event loop,
 * and one UPDATE over 20,000 revisions held at BUILDING (the benchmark's shape) stopped every
 * request for ~180 ms at each renewal.
 */
describe('lease renewal with many revisions held', () => {
  it('creates name the process as they are written; 1,100 revisions started by PATCH are named in statements of at most 500; then only the process lease is renewed', {
    timeout: 180_000,
  }, async () => {
    const t = await inProcessApp({ stageMs: 3_600_000, env: { PIPELINE_LEASE_MS: '1500' } });
    try {
      const batches: number[] = [];
      const hold = t.store.holdRevisions.bind(t.store);
      t.store.holdRevisions = async (ids, owner) => {
        batches.push(ids.length);
        return hold(ids, owner);
      };
      const fx = await workspaceFixtures(t.api);
      const processId = (await t.sql.get<{ process_id: string }>('SELECT process_id FROM process_leases'))!.process_id;
      const heldBy = async (status: string) =>
        Number((await t.sql.get<{ n: number }>('SELECT COUNT(*) AS n FROM revisions WHERE status = ? AND runner_id = ?', status, processId))!.n);

      // Each create's revision names the process as soon as the create has answered: no renewal wrote it.
      for (let i = 0; i < 300; i += 1) {
        const created = await t.api.post('/v2/deployments', githubBody(uniqueName('held'), fx.integrationId));
        expect(created.status).toBe(201);
        expect(await t.sql.get('SELECT runner_id FROM revisions WHERE id = ?', created.body.latest_revision_id)).toEqual({ runner_id: processId });
      }
      expect(batches).toEqual([]);

      // Started by a PATCH while the renewals go on: each renewal names those started since the last one.
      for (let i = 0; i < 1100; i += 1) {
        const created = await t.api.post('/v2/deployments', { name: uniqueName('patched'), source: 'internal_docker' });
        expect(created.status).toBe(201);
        const patched = await t.api.patch(`/v2/deployments/${created.body.id}`, { source_revision_config: { image_uri: 'registry.local/agent@sha256:abc' } });
        expect(patched.status).toBe(200);
      }
      await eventually(async () => ((await heldBy('DEPLOYING')) === 1100 ? true : undefined), 30_000);
      expect(batches.reduce((a, b) => a + b, 0)).toBe(1100);
      expect(Math.max(...batches)).toBeLessThanOrEqual(500);

      // From now on a renewal writes the process lease alone: it moves on, and no revision is written.
      batches.length = 0;
      const leaseNow = async () =>
        (await t.sql.get<{ lease_expires_at: string }>('SELECT lease_expires_at FROM process_leases WHERE process_id = ?', processId))!.lease_expires_at;
      const first = await leaseNow();
      await eventually(async () => ((await leaseNow()) > first ? true : undefined), 10_000);
      const second = await leaseNow();
      await eventually(async () => ((await leaseNow()) > second ? true : undefined), 10_000);
      expect(batches).toEqual([]);
      expect(await heldBy('BUILDING')).toBe(300);
      expect(await heldBy('DEPLOYING')).toBe(1100);
    } finally {
      await t.close();
    }
  });

  it('a create while the process lease has lapsed names no one; the renewal that finds the lapse names it', { timeout: 60_000 }, async () => {
    const t = await inProcessApp({ stageMs: 3_600_000, env: { PIPELINE_LEASE_MS: '1500' } });
    try {
      const fx = await workspaceFixtures(t.api);
      const processId = (await t.sql.get<{ process_id: string }>('SELECT process_id FROM process_leases'))!.process_id;
      // As after a stall longer than a lease: the row says the lease ended a minute ago.
      await t.sql.run('UPDATE process_leases SET lease_expires_at = ? WHERE process_id = ?', new Date(Date.now() - 60_000).toISOString(), processId);
      const created = await t.api.post('/v2/deployments', githubBody(uniqueName('lapsed'), fx.integrationId));
      expect(created.status).toBe(201);
      const runner = async () =>
        (await t.sql.get<{ runner_id: string | null }>('SELECT runner_id FROM revisions WHERE id = ?', created.body.latest_revision_id))!.runner_id;
      expect(await runner()).toBeNull();
      await eventually(async () => ((await runner()) === processId ? true : undefined), 10_000);
    } finally {
      await t.close();
    }
  });
});
