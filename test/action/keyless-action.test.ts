import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { GithubOidcIssuer } from '../helpers/github-oidc-issuer.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { ROOT, runAction } from './harness.ts';

/**
 * The bundled Action run as a runner runs it, with no `api-key`: the runner's token endpoint
 * (`ACTIONS_ID_TOKEN_REQUEST_URL` / `_TOKEN`) is the local issuer's, which signs like GitHub's,
 * and the real server verifies against that issuer (contract section 13).
 */
describe('the bundled Action without an api-key (keyless CI)', () => {
  let issuer: GithubOidcIssuer;
  let server: ServerProcess;
  let api: Api;
  let listenerId: string;

  beforeAll(async () => {
    issuer = await new GithubOidcIssuer().start();
    server = await startServerProcess({ SANDBOX_STAGE_MS: '50', GITHUB_OIDC_ISSUER: issuer.url, GITHUB_OIDC_AUDIENCE: issuer.audience });
    api = apiClient(server.url, server.apiKey);
    listenerId = (await workspaceFixtures(api)).listenerId;
    const workspaceId = (await api.get('/v1/workspaces')).body[0].id;
    expect(
      (await api.post(`/v1/workspaces/${workspaceId}/github-trust`, { repository_id: 4242, repository_owner_id: 77, ref: 'refs/heads/main' })).status,
    ).toBe(201);
  });
  afterAll(async () => {
    await server?.kill();
    await issuer?.stop();
  });

  const runnerEnv = () => ({ ACTIONS_ID_TOKEN_REQUEST_URL: issuer.runnerTokenUrl, ACTIONS_ID_TOKEN_REQUEST_TOKEN: issuer.requestToken });

  it('exchanges the runner token for a key, masks it, deploys and waits to DEPLOYED', async () => {
    const runId = '9090901';
    issuer.runnerClaims = { run_id: runId };
    const name = uniqueName('keyless');
    const run = await runAction(
      { 'api-url': server.url, 'oidc-audience': issuer.audience, name, 'image-uri': 'registry.example.com/acme/agent:1', 'listener-id': listenerId },
      runnerEnv(),
    );
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.outputs.status).toBe('DEPLOYED');
    expect(issuer.runnerAudiences.at(-1)).toBe(issuer.audience);

    // The minted key: masked before anything else could print it, and printed nowhere else.
    const masked = [...run.stdout.matchAll(/::add-mask::(cpk_[A-Za-z0-9_-]+)/g)].map((m) => m[1]!);
    expect(masked).toHaveLength(1);
    const key = masked[0]!;
    const everything = run.stdout + run.stderr + run.summary + JSON.stringify(run.outputs);
    expect(everything.split(key).length - 1).toBe(1);
    expect(run.stdout.indexOf(`::add-mask::${key}`)).toBeLessThan(run.stdout.indexOf('Exchanged the workflow'));
    // The ID token is masked too (the runner client does it).
    expect(run.stdout).toMatch(/::add-mask::eyJ[\w-]+\.[\w-]+\.[\w-]+/);

    const listed = (await api.get('/v1/api-keys')).body.find((k: { github_actions?: { run_id: string } }) => k.github_actions?.run_id === runId);
    expect(listed).toMatchObject({ github_actions: { repository: 'acme/agent', repository_id: '4242', ref: 'refs/heads/main' } });
    expect((await apiClient(server.url, key).get(`/v2/deployments/${run.outputs['deployment-id']}`)).body.name).toBe(name);
  });

  it("fails the step with the server's reason when the token is refused (the audience defaults to api-url)", async () => {
    issuer.runnerClaims = {};
    const run = await runAction(
      { 'api-url': server.url, name: uniqueName('keyless'), 'image-uri': 'registry.example.com/acme/agent:1', 'listener-id': listenerId },
      runnerEnv(),
    );
    expect(run.code).toBe(1);
    expect(issuer.runnerAudiences.at(-1)).toBe(server.url);
    expect(run.stdout).toMatch(/::error::The control plane refused the workflow's GitHub OIDC token: .*HTTP 401.*\baud\b/);
    expect(run.outputs['deployment-id'] ?? '').toBe('');
  });

  it('without api-key and outside a job that may request tokens, asks for the key', async () => {
    const run = await runAction({ 'api-url': server.url, name: uniqueName('keyless'), 'image-uri': 'registry.example.com/acme/agent:1' });
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/Input api-key is required.*id-token: write/);
  });

  it('the CLI deploys with --github-oidc-token, never printing the key, and a token is good for one exchange', async () => {
    const token = await issuer.token();
    const cli = (extra: string[]) =>
      spawnSync(
        process.execPath,
        [
          join(ROOT, 'cli/main.ts'),
          'deploy',
          '--api-url',
          server.url,
          '--github-oidc-token',
          token,
          '--name',
          uniqueName('cli-keyless'),
          '--image-uri',
          'registry.example.com/acme/agent:1',
          '--listener-id',
          listenerId,
          '--json',
          ...extra,
        ],
        {
          encoding: 'utf8',
          env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
        },
      );
    const first = cli([]);
    expect(first.status, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ outcome: 'deployed', status: 'DEPLOYED' });
    expect(first.stderr).toMatch(/exchanged the GitHub OIDC token for key [0-9a-f-]{36}/);
    expect(first.stdout + first.stderr).not.toMatch(/cpk_/);
    const again = cli([]);
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(/HTTP 401.*\bjti\b/);
    const both = cli(['--api-key', server.apiKey]);
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/not both/);
  });
});
