import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';

// The harness itself: three processes started together on one PostgreSQL database (they race for
// the migrations and the bootstrap), each serving the whole API over the same data.
describe('three server processes on one PostgreSQL database', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await startCluster({ SANDBOX_STAGE_MS: '100', RECONCILE_INTERVAL_MS: '0' });
  });
  afterAll(async () => {
    await cluster?.stopAll();
  });

  it('start together, accept the one bootstrap key and see what each other wrote', async () => {
    expect(new Set(cluster.processes.map((p) => p.port)).size).toBe(3);
    for (let i = 0; i < 3; i += 1) expect((await cluster.api(i).get('/v2/deployments')).status).toBe(200);

    const fx = await workspaceFixtures(cluster.api(0));
    const created = await cluster.api(1).post('/v2/deployments', githubBody(uniqueName('harness'), fx.integrationId));
    expect(created.status).toBe(201);
    for (let i = 0; i < 3; i += 1) {
      const read = await cluster.api(i).get(`/v2/deployments/${created.body.id}`);
      expect(read.status).toBe(200);
      expect(read.body.name).toBe(created.body.name);
    }
    // One bootstrap organization, workspace and sandbox listener, however many processes raced for it.
    const listeners = await cluster.api(2).get('/v2/listeners');
    expect(listeners.body.resources.filter((l: { compute_type: string }) => l.compute_type === 'sandbox')).toHaveLength(1);
    const keys = await cluster.api(0).get('/v1/api-keys');
    expect(keys.status).toBe(200);
    expect(keys.body).toHaveLength(1);
  });

  it('the random client spreads its requests over every process', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 60; i += 1) seen.add(cluster.randomUrl());
    expect(seen).toEqual(new Set(cluster.processes.map((p) => p.url)));
    for (let i = 0; i < 10; i += 1) expect((await cluster.random().get('/v2/deployments')).status).toBe(200);
  });
});
