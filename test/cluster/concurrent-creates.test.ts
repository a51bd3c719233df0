import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { openRawSql } from '../helpers/raw-sql.ts';

type Created = { id: string; name: string; latest_revision_id: string };

/**
 * Creates from three processes at once on one PostgreSQL (each create one pipelined transaction,
 * `PgDb.batch`): a name asked for by several processes together is given once, every create
 * answered 201 is stored whole (deployment, first revision, tracing project, audit entry) and read
 * back alike by every process, and a refused one leaves nothing behind.
 */
describe('concurrent creates over three processes on one PostgreSQL (contract §5)', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await startCluster({ RECONCILE_INTERVAL_MS: '0', SANDBOX_STAGE_MS: '3600000' });
  });
  afterAll(async () => {
    await cluster?.stopAll();
  });

  it('keep every name unique and lose no acknowledged create', async () => {
    const fx = await workspaceFixtures(cluster.api(0));
    const contested = Array.from({ length: 10 }, () => uniqueName('contested'));
    const own = Array.from({ length: 30 }, () => uniqueName('own'));
    // Each contested name is asked for by all three processes at once; the others once each, spread over them.
    const asks = [...contested.flatMap((name) => [0, 1, 2].map((i) => ({ name, i }))), ...own.map((name, n) => ({ name, i: n % 3 }))];
    const answers = await Promise.all(asks.map(({ name, i }) => cluster.api(i).post<Created>('/v2/deployments', githubBody(name, fx.integrationId))));

    const byName = new Map<string, number[]>();
    for (const [n, { name }] of asks.entries()) byName.set(name, [...(byName.get(name) ?? []), answers[n]!.status]);
    for (const name of contested) expect(byName.get(name)!.sort(), name).toEqual([201, 409, 409]);
    for (const name of own) expect(byName.get(name), name).toEqual([201]);

    const created = answers.filter((a) => a.status === 201).map((a) => a.body);
    expect(created).toHaveLength(contested.length + own.length);
    // Every process reads every acknowledged create and its first revision.
    for (const i of [0, 1, 2]) {
      const api = cluster.api(i);
      for (const deployment of created) {
        expect((await api.get(`/v2/deployments/${deployment.id}`)).status).toBe(200);
        expect((await api.get(`/v2/deployments/${deployment.id}/revisions/${deployment.latest_revision_id}`)).status).toBe(200);
      }
    }
    // What is stored: one deployment, one revision, one tracing project and one successful audit entry per 201; nothing of a 409.
    const sql = openRawSql(cluster.databaseUrl);
    try {
      const names = [...contested, ...own];
      const count = async (text: string, ...params: unknown[]) => (await sql.get<{ n: number }>(text, ...params))!.n;
      expect(await count('SELECT count(*) AS n FROM deployments WHERE name = ANY(?)', names)).toBe(created.length);
      expect(await count('SELECT count(*) AS n FROM tracing_projects WHERE name = ANY(?)', names)).toBe(created.length);
      expect(await count('SELECT count(*) AS n FROM revisions r JOIN deployments d ON d.id = r.deployment_id WHERE d.name = ANY(?)', names)).toBe(
        created.length,
      );
      const audited = await sql.all<{ resource_id: string }>(
        "SELECT resource_id FROM audit_events WHERE action = 'create' AND resource_type = 'deployment' AND outcome = 'succeeded'",
      );
      expect(audited.map((a) => a.resource_id).sort()).toEqual(created.map((d) => d.id).sort());
      const refused = "SELECT count(*) AS n FROM audit_events WHERE action = 'create' AND resource_type = 'deployment' AND outcome = 'failed' AND status = 409";
      expect(await count(refused)).toBe(2 * contested.length);
    } finally {
      await sql.close();
    }
  });
});
