import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { GithubOidcIssuer } from '../helpers/github-oidc-issuer.ts';

/** Keyless CI on three server processes sharing one PostgreSQL database (contract §10, §13). */
describe('keyless CI across processes', () => {
  let issuer: GithubOidcIssuer;
  let cluster: Cluster;

  beforeAll(async () => {
    issuer = await new GithubOidcIssuer().start();
    cluster = await startCluster({ RECONCILE_INTERVAL_MS: '0', GITHUB_OIDC_ISSUER: issuer.url, GITHUB_OIDC_AUDIENCE: issuer.audience });
    const workspaceId = (await cluster.api(0).get('/v1/workspaces')).body[0].id;
    expect((await cluster.api(1).post(`/v1/workspaces/${workspaceId}/github-trust`, { repository_id: 4242, repository_owner_id: 77 })).status).toBe(201);
  });
  afterAll(async () => {
    await cluster?.stopAll();
    await issuer?.stop();
  });

  it('one token sent to every process at once mints one key', async () => {
    const token = await issuer.token();
    const answers = await Promise.all([0, 1, 2, 0, 1, 2].map((i) => cluster.api(i, '').post('/v1/auth/github-actions/token', { token })));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 401, 401, 401, 401, 401]);
  });

  it('a minted key revoked through one process is refused by each of the others on the very next request', async () => {
    for (let revoker = 0; revoker < 3; revoker += 1) {
      const minted = await cluster.api((revoker + 1) % 3, '').post('/v1/auth/github-actions/token', { token: await issuer.token() });
      expect(minted.status).toBe(201);
      const key = minted.body.api_key as string;
      // Every process has used the key, so each holds it in its cache.
      for (let i = 0; i < 3; i += 1) expect((await cluster.api(i, key).get('/v2/deployments')).status).toBe(200);
      expect((await cluster.api(revoker).delete(`/v1/api-keys/${minted.body.key_id}`)).status).toBe(204);
      const answers = await Promise.all([0, 1, 2].map((i) => cluster.api(i, key).get('/v2/deployments')));
      expect(answers.map((a) => a.status)).toEqual([401, 401, 401]);
    }
  });
});
