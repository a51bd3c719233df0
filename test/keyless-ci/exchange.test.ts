import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { GithubOidcIssuer, type TokenOptions } from '../helpers/github-oidc-issuer.ts';
import { inProcessApp } from '../helpers/in-process.ts';

const EXCHANGE = '/v1/auth/github-actions/token';

/**
 * Contract section 13 through the whole app (in process, on the suite's backend) against a local
 * issuer that signs like GitHub's token service: trust entries, the exchange, its refusals, the
 * minted key's reach, revocation and removal of the entry.
 */
describe('keyless CI: a GitHub Actions ID token exchanged for a workspace key', () => {
  let issuer: GithubOidcIssuer;
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let workspaceA: string;
  let workspaceB: string;
  let trustA: string;
  let anon: Api;

  const exchange = (token: string, extra: Record<string, unknown> = {}) => anon.post(EXCHANGE, { token, ...extra });

  beforeAll(async () => {
    issuer = await new GithubOidcIssuer().start();
    t = await inProcessApp({ env: { GITHUB_OIDC_ISSUER: issuer.url, GITHUB_OIDC_AUDIENCE: issuer.audience } });
    anon = apiClient('', '', {}, (url, init) => {
      const headers = new Headers(init.headers);
      headers.delete('x-api-key');
      return t.app.request(url, { ...init, headers });
    });
    workspaceA = (await t.api.post('/v1/workspaces', { name: 'ci-a' })).body.id;
    workspaceB = (await t.api.post('/v1/workspaces', { name: 'ci-b' })).body.id;
    const created = await t.api.post(`/v1/workspaces/${workspaceA}/github-trust`, {
      repository_id: 4242,
      repository_owner_id: 77,
      ref: 'refs/heads/main',
      description: 'deploys from main',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    trustA = created.body.id;
    expect(created.body).toMatchObject({
      workspace_id: workspaceA,
      repository_id: 4242,
      repository_owner_id: 77,
      ref: 'refs/heads/main',
      environment: null,
      job_workflow_ref: null,
    });
  });
  afterAll(async () => {
    await t?.close();
    await issuer?.stop();
  });

  it('mints a key of at most an hour that works in its workspace only, listed with the claims it was minted for', async () => {
    const token = await issuer.token({ claims: { run_id: '555001' } });
    const answer = await exchange(token);
    expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    const { api_key: key, expires_at: expiresAt, workspace_id: workspaceId, key_id: keyId } = answer.body;
    expect(workspaceId).toBe(workspaceA);
    expect(key).toMatch(/^cpk_/);
    const lifetime = Date.parse(expiresAt) - Date.now();
    expect(lifetime).toBeGreaterThan(55 * 60_000);
    expect(lifetime).toBeLessThanOrEqual(60 * 60_000);

    const minted = t.client(key);
    expect((await minted.get('/v2/deployments')).status).toBe(200);
    const listener = (await minted.get('/v2/listeners')).body.resources[0];
    expect(listener.id).toBeDefined();
    const own = await t.client(t.apiKey, { 'x-tenant-id': workspaceA }).get('/v2/listeners');
    expect(own.body.resources.map((l: { id: string }) => l.id)).toContain(listener.id);
    // Not another workspace, not the organization's keys or trust.
    expect((await t.client(key, { 'x-tenant-id': workspaceB }).get('/v2/deployments')).status).toBe(403);
    expect((await minted.post('/v1/api-keys', { description: 'escalate' })).status).toBe(403);
    expect((await minted.post(`/v1/workspaces/${workspaceA}/github-trust`, { repository_id: 1, repository_owner_id: 2 })).status).toBe(403);
    expect((await minted.get(`/v1/workspaces/${workspaceB}/github-trust`)).status).toBe(404);
    expect((await minted.get(`/v1/workspaces/${workspaceA}/github-trust`)).body.map((e: { id: string }) => e.id)).toEqual([trustA]);

    const listed = (await t.api.get('/v1/api-keys')).body.find((k: { id: string }) => k.id === keyId);
    expect(listed).toMatchObject({
      workspace_id: workspaceA,
      expires_at: expiresAt,
      github_actions: {
        trust_id: trustA,
        repository: 'acme/agent',
        repository_id: '4242',
        repository_owner_id: '77',
        ref: 'refs/heads/main',
        event_name: 'push',
        run_id: '555001',
      },
    });
    expect(JSON.stringify(listed)).not.toContain(key);
    // The token is used, and it is not kept anywhere the API shows.
    expect(JSON.stringify(answer.body)).not.toContain(token.split('.')[2]);
  });

  it('answers 422 to a body without a token and to unknown fields, and 401/403 only for tokens', async () => {
    expect((await anon.post(EXCHANGE, {})).status).toBe(422);
    expect((await anon.post(EXCHANGE, { token: await issuer.token(), worksapce_id: workspaceA })).status).toBe(422);
    expect((await anon.post(EXCHANGE, { token: 'not-a-jwt' })).status).toBe(401);
  });

  const refusals: Array<{ what: string; options: () => TokenOptions; status: 401 | 403; detail: RegExp }> = [
    { what: 'another repository_id with the same name', options: () => ({ claims: { repository_id: '999999' } }), status: 403, detail: /repository_id/ },
    { what: 'another repository_owner_id', options: () => ({ claims: { repository_owner_id: '78' } }), status: 403, detail: /repository_owner_id/ },
    {
      what: 'a ref the entry does not allow',
      options: () => ({ claims: { ref: 'refs/heads/feature' } }),
      status: 403,
      detail: /\bref\b.*refs\/heads\/feature/,
    },
    {
      what: 'pull_request_target',
      options: () => ({ claims: { event_name: 'pull_request_target' } }),
      status: 403,
      detail: /\bevent_name \(pull_request_target\)/,
    },
    { what: 'workflow_run', options: () => ({ claims: { event_name: 'workflow_run' } }), status: 403, detail: /\bevent_name \(workflow_run\)/ },
    { what: 'the wrong audience', options: () => ({ audience: 'https://github.com/acme' }), status: 401, detail: /\baud\b/ },
    { what: 'another issuer', options: () => ({ issuer: 'https://token.actions.githubusercontent.com' }), status: 401, detail: /\biss\b/ },
    { what: 'an expired token (beyond 60 s of skew)', options: () => ({ expiresIn: -90 }), status: 401, detail: /expired/ },
    {
      what: 'a token not valid yet (beyond 60 s of skew)',
      options: () => ({ notBefore: Math.floor(Date.now() / 1000) + 120 }),
      status: 401,
      detail: /\bnbf\b/,
    },
    { what: 'a token issued in the future', options: () => ({ issuedAt: Math.floor(Date.now() / 1000) + 120 }), status: 401, detail: /\biat\b/ },
    { what: 'another key under the published kid', options: () => ({ unpublishedKey: true }), status: 401, detail: /signature/ },
    { what: 'another key under its own kid', options: () => ({ unpublishedKey: true, kid: 'unpublished' }), status: 401, detail: /\bkid\b/ },
    { what: 'alg none', options: () => ({ alg: 'none' }), status: 401, detail: /RS256/ },
    { what: 'HS256 keyed with the public key', options: () => ({ alg: 'HS256' }), status: 401, detail: /RS256/ },
    { what: 'no repository_id claim', options: () => ({ claims: { repository_id: undefined } }), status: 401, detail: /repository_id/ },
    { what: 'no jti', options: () => ({ claims: { jti: '' } }), status: 401, detail: /jti/ },
  ];
  for (const refusal of refusals) {
    it(`refuses ${refusal.what} (${refusal.status}), naming the claim and never echoing the token`, async () => {
      const token = await issuer.token(refusal.options());
      const keysBefore = (await t.api.get('/v1/api-keys')).body.length;
      const answer = await exchange(token);
      expect(answer.status, JSON.stringify(answer.body)).toBe(refusal.status);
      expect(answer.body.detail).toMatch(refusal.detail);
      const text = JSON.stringify(answer.body) + [...answer.headers.values()].join(' ');
      for (const part of token.split('.').filter((p) => p.length > 0)) expect(text).not.toContain(part);
      expect((await t.api.get('/v1/api-keys')).body.length).toBe(keysBefore);
    });
  }

  it('accepts a token within the 60 s of skew (expired 30 s ago), and an audience or issuer that differs only by a trailing slash', async () => {
    expect((await exchange(await issuer.token({ expiresIn: -30 }))).status).toBe(201);
    expect((await exchange(await issuer.token({ audience: `${issuer.audience}/` }))).status).toBe(201);
    expect((await exchange(await issuer.token({ issuer: `${issuer.url}/` }))).status).toBe(201);
    expect((await exchange(await issuer.token({ audience: `${issuer.audience}/x` }))).status).toBe(401);
  });

  it('uses each jti once, also when the same token arrives many times at once', async () => {
    const token = await issuer.token();
    const answers = await Promise.all(Array.from({ length: 8 }, () => exchange(token)));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 401, 401, 401, 401, 401, 401, 401]);
    const refused = answers.find((a) => a.status === 401)!;
    expect(refused.body.detail).toMatch(/\bjti\b/);
    expect((await exchange(token)).status).toBe(401);
  });

  it('matches environment and job_workflow_ref exactly when an entry sets them; several workspaces need workspace_id', async () => {
    const repo = { repository_id: '5151', repository_owner_id: '77', repository: 'acme/prod-agent' };
    const entry = await t.api.post(`/v1/workspaces/${workspaceB}/github-trust`, {
      repository_id: 5151,
      repository_owner_id: 77,
      environment: 'production',
      job_workflow_ref: 'acme/prod-agent/.github/workflows/deploy.yml@refs/heads/main',
    });
    expect(entry.status).toBe(201);
    const good = { ...repo, environment: 'production', job_workflow_ref: 'acme/prod-agent/.github/workflows/deploy.yml@refs/heads/main' };
    expect((await exchange(await issuer.token({ claims: { ...good, environment: 'Production' } }))).body.detail).toMatch(/environment/);
    expect((await exchange(await issuer.token({ claims: { ...good, environment: undefined } }))).status).toBe(403);
    const otherWorkflow = await exchange(
      await issuer.token({ claims: { ...good, job_workflow_ref: 'acme/prod-agent/.github/workflows/other.yml@refs/heads/main' } }),
    );
    expect(otherWorkflow.status).toBe(403);
    expect(otherWorkflow.body.detail).toMatch(/job_workflow_ref/);
    const ok = await exchange(await issuer.token({ claims: good }));
    expect(ok.status).toBe(201);
    expect(ok.body.workspace_id).toBe(workspaceB);

    // A second workspace trusting the same repository: the token must say which one.
    expect((await t.api.post(`/v1/workspaces/${workspaceA}/github-trust`, { repository_id: 5151, repository_owner_id: 77 })).status).toBe(201);
    const ambiguous = await exchange(await issuer.token({ claims: good }));
    expect(ambiguous.status).toBe(403);
    expect(ambiguous.body.detail).toMatch(/workspace_id/);
    const named = await exchange(await issuer.token({ claims: good }), { workspace_id: workspaceA });
    expect(named.status).toBe(201);
    expect(named.body.workspace_id).toBe(workspaceA);
  });

  it('deleting the trust entry stops new exchanges; revoking a minted key stops it at once', async () => {
    const repo = { repository_id: '6161', repository_owner_id: '77', repository: 'acme/short-lived' };
    const entry = (await t.api.post(`/v1/workspaces/${workspaceA}/github-trust`, { repository_id: 6161, repository_owner_id: 77 })).body;
    const first = await exchange(await issuer.token({ claims: repo }));
    expect(first.status).toBe(201);
    const minted = t.client(first.body.api_key);
    expect((await minted.get('/v2/deployments')).status).toBe(200);

    expect((await t.api.delete(`/v1/workspaces/${workspaceA}/github-trust/${entry.id}`)).status).toBe(204);
    expect((await t.api.delete(`/v1/workspaces/${workspaceA}/github-trust/${entry.id}`)).status).toBe(404);
    const after = await exchange(await issuer.token({ claims: repo }));
    expect(after.status).toBe(403);
    expect(after.body.detail).toMatch(/repository_id/);

    expect((await t.api.delete(`/v1/api-keys/${first.body.key_id}`)).status).toBe(204);
    expect((await minted.get('/v2/deployments')).status).toBe(401);
  });

  it('trust entries: numbers only, full refs, unknown fields refused, organization keys to change them, other organizations never see them', async () => {
    const post = (body: unknown) => t.api.post(`/v1/workspaces/${workspaceA}/github-trust`, body);
    expect((await post({ repository_id: '4242', repository_owner_id: 77 })).status).toBe(422);
    expect((await post({ repository_id: 4242 })).status).toBe(422);
    expect((await post({ repository_id: 4242, repository_owner_id: 77, ref: 'main' })).status).toBe(422);
    expect((await post({ repository_id: 4242, repository_owner_id: 77, enviroment: 'prod' })).status).toBe(422);
    expect((await post({ repository_id: 4242, repository_owner_id: 77, job_workflow_ref: 'deploy.yml' })).status).toBe(422);
    expect((await t.api.post(`/v1/workspaces/${crypto.randomUUID()}/github-trust`, { repository_id: 1, repository_owner_id: 2 })).status).toBe(404);
    const workspaceKey = (await t.api.post('/v1/api-keys', { workspace_id: workspaceA, description: 'ws' })).body.key;
    expect((await t.client(workspaceKey).post(`/v1/workspaces/${workspaceA}/github-trust`, { repository_id: 1, repository_owner_id: 2 })).status).toBe(403);
    expect((await t.client(workspaceKey).delete(`/v1/workspaces/${workspaceA}/github-trust/${trustA}`)).status).toBe(403);
    const listed = await t.api.get(`/v1/workspaces/${workspaceA}/github-trust`);
    expect(listed.status).toBe(200);
    expect(listed.body.map((e: { id: string }) => e.id)).toContain(trustA);
  });
});
