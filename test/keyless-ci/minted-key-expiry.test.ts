import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { GithubOidcIssuer } from '../helpers/github-oidc-issuer.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { movableClock } from '../helpers/movable-clock.ts';

describe('a minted key ends on its own after at most an hour', () => {
  let issuer: GithubOidcIssuer;
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  const clock = movableClock();
  let anon: Api;

  beforeAll(async () => {
    issuer = await new GithubOidcIssuer().start();
    t = await inProcessApp({ clock, env: { GITHUB_OIDC_ISSUER: issuer.url, GITHUB_OIDC_AUDIENCE: issuer.audience } });
    anon = apiClient('', '', {}, (url, init) => t.app.request(url, init));
    expect((await t.api.post(`/v1/workspaces/${t.workspaceId}/github-trust`, { repository_id: 4242, repository_owner_id: 77 })).status).toBe(201);
  });
  afterAll(async () => {
    await t?.close();
    await issuer?.stop();
  });

  it('works until expires_at, then is refused (also from the cache of a process that used it) and no longer listed', async () => {
    const answer = await anon.post('/v1/auth/github-actions/token', { token: await issuer.token() });
    expect(answer.status).toBe(201);
    const minted = t.client(answer.body.api_key);
    // Used twice, so the key and its hash are in this process's caches.
    expect((await minted.get('/v2/deployments')).status).toBe(200);
    expect((await minted.get('/v2/deployments')).status).toBe(200);
    expect((await t.api.get('/v1/api-keys')).body.map((k: { id: string }) => k.id)).toContain(answer.body.key_id);

    clock.advance(Date.parse(answer.body.expires_at) - Date.parse(clock.now()) - 1000);
    expect((await minted.get('/v2/deployments')).status).toBe(200);
    clock.advance(1000);
    const refused = await minted.get('/v2/deployments');
    expect(refused.status).toBe(401);
    expect(refused.body.detail).toMatch(/expired/);
    expect((await t.api.get('/v1/api-keys')).body.map((k: { id: string }) => k.id)).not.toContain(answer.body.key_id);
    // The ordinary key has no expiry and goes on working an hour later.
    expect((await t.api.get('/v2/deployments')).status).toBe(200);
  });
});
