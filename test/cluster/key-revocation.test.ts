import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from '../helpers/cluster.ts';

const KEYS = 6;

describe('an API key revoked through one process (contract §3, §10)', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await startCluster({ RECONCILE_INTERVAL_MS: '0' });
  });
  afterAll(async () => {
    await cluster?.stopAll();
  });

  it('is refused by each of the others on the very next request', async () => {
    const outcomes: string[] = [];
    for (let k = 0; k < KEYS; k += 1) {
      const revoker = k % 3;
      const created = await cluster.api((k + 1) % 3).post('/v1/api-keys', { description: `cluster key ${k}` });
      expect(created.status).toBe(201);
      const key = created.body.key as string;
      // Every process has used the key (so each one holds it in its cache, the case that matters).
      for (let i = 0; i < 3; i += 1) expect((await cluster.api(i, key).get('/v2/deployments')).status).toBe(200);

      expect((await cluster.api(revoker).delete(`/v1/api-keys/${created.body.id}`)).status).toBe(204);
      // The very next request on each process: the others at once, in parallel, then the revoker.
      const others = [0, 1, 2].filter((i) => i !== revoker);
      const answers = await Promise.all(others.map((i) => cluster.api(i, key).get('/v2/deployments')));
      answers.forEach((a, n) => outcomes.push(`key ${k} revoked via ${revoker}: process ${others[n]} → ${a.status}`));
      expect((await cluster.api(revoker, key).get('/v2/deployments')).status).toBe(401);
    }
    expect(
      outcomes.filter((o) => !o.endsWith('→ 401')),
      outcomes.join('\n'),
    ).toEqual([]);
    // The bootstrap key still works everywhere: only the revoked keys are refused.
    for (let i = 0; i < 3; i += 1) expect((await cluster.api(i).get('/v2/deployments')).status).toBe(200);
  });
});
