import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { githubBody, revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, pushPayload, revisionsOf } from '../webhooks/github.ts';
import { linkThroughSetup, open } from './link.ts';
import { serverSql } from './sql.ts';
import { GithubStandIn } from './stand-in.ts';

/** The value of a hidden field or attribute as a browser reads it (the pages escape with numeric entities). */
const unescape = (text: string) => text.replace(/&#(\d+);/g, (_, code: string) => String.fromCharCode(Number(code)));

/**
 * Contract §19, "Create the App from the manifest": a server with no App settings at all, the
 * operator's browser played by fetch, GitHub by the stand-in. GitHub's conversion hands over the
 * App's id, key, OAuth client and the webhook secret it generated; after a restart the server is
 * that App: pushes signed with the generated secret are accepted, installation tokens are minted
 * with the stored key, and the environment's own settings still win.
 */
describe('creating the GitHub App from its manifest', () => {
  let github: GithubStandIn;
  let server: ServerProcess;
  const env = () => ({ GITHUB_URL: github.url, GITHUB_API_URL: github.apiUrl, RECONCILE_INTERVAL_MS: '0' });

  beforeAll(async () => {
    github = await new GithubStandIn().start();
    server = await startServerProcess(env());
  });

  afterAll(async () => {
    await server?.kill('SIGTERM');
    await github?.stop();
  });

  it('leaves working App settings, stored encrypted, with nothing copied by hand', async () => {
    const form = await open(`${server.url}/console/github/new-app`);
    expect(form.status).toBe(200);
    expect(form.html).toContain('name="api_key" type="password" autocomplete="off"');
    const post = (fields: Record<string, string>) =>
      open(`${server.url}/console/github/new-app`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(fields).toString(),
      });
    expect((await post({ api_key: 'lsv2_wrong' })).status).toBe(401);
    const toGithub = await post({ api_key: server.apiKey, github_organization: 'acme', app_name: 'Acme deployer' });
    expect(toGithub.status).toBe(200);
    expect(toGithub.html).not.toContain(server.apiKey);
    const action = unescape(/<form method="post" action="([^"]+)"/.exec(toGithub.html)![1]!);
    expect(action.startsWith(`${github.url}/organizations/acme/settings/apps/new?state=`)).toBe(true);
    const manifest = unescape(/name="manifest" value="([^"]+)"/.exec(toGithub.html)![1]!);
    expect(JSON.parse(manifest)).toMatchObject({
      name: 'Acme deployer',
      hook_attributes: { url: expect.stringMatching(/\/v1\/webhooks\/github$/) },
      setup_url: expect.stringMatching(/\/v1\/integrations\/github\/setup$/),
      request_oauth_on_install: false,
      default_permissions: { contents: 'read', deployments: 'write', statuses: 'write', checks: 'write' },
    });
    // The manifest the docs show (for registering by hand) is this one, with the docs' example URL.
    const posted = JSON.parse(manifest) as { url: string; name: string };
    const documented = readFileSync(new URL('../../docs/github-app-manifest.json', import.meta.url), 'utf8').replaceAll(
      'https://control-plane.example.com',
      posted.url,
    );
    expect({ ...posted, name: 'Agent control plane' }).toEqual(JSON.parse(documented));

    // The operator clicks "Create" on GitHub: GitHub sends the browser back with a code.
    const created = await open(action, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ manifest }).toString(),
    });
    expect(created.status).toBe(302);
    expect(github.manifests.map((m) => m.organization)).toEqual(['acme']);
    const back = await open(created.location!.replace(/^http:\/\/localhost:\d+/, server.url));
    expect(back.status, back.html).toBe(200);
    expect(back.html).toContain('acme-deployer');
    // The code and the state are used up.
    expect((await open(created.location!.replace(/^http:\/\/localhost:\d+/, server.url))).status).toBe(400);

    // Stored sealed: neither the private key, nor the client secret, nor the webhook secret in clear,
    // in the stored row (either backend) nor anywhere in an SQLite file.
    const sql = serverSql(server);
    const stored = await sql.all<{ app_id: string; sealed: string }>('SELECT app_id, sealed FROM github_app_registrations').finally(() => sql.close());
    expect(stored.map((r) => r.app_id)).toEqual([github.appId]);
    const database = [server.databasePath, `${server.databasePath}-wal`]
      .map((f) => {
        try {
          return readFileSync(f).toString('latin1');
        } catch {
          return '';
        }
      })
      .join('');
    for (const secret of [github.webhookSecret!, github.clientSecret, github.privateKeyPem.split('\n')[1]!]) {
      expect(stored[0]!.sealed.includes(secret)).toBe(false);
      expect(database.includes(secret)).toBe(false);
    }
    expect(server.output()).not.toContain(github.webhookSecret!);

    // From the next start, the server is that App.
    await server.kill('SIGTERM');
    server = await server.restart(env());
    expect(server.output()).toContain('using the GitHub App created from the manifest');
    const api = apiClient(server.url, server.apiKey);
    const installation = github.install({ login: 'acme', id: 501, type: 'Organization' }, ['acme/agent'], ['alice']);
    const integrationId = await linkThroughSetup(server.url, api, github, installation, 'alice');
    const deployment = await api.post(
      '/v2/deployments',
      githubBody(uniqueName('manifest'), integrationId, {
        source_config: { integration_id: integrationId, repo_url: `${github.url}/acme/agent`, deployment_type: 'dev', build_on_push: true },
        source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json' },
      }),
    );
    expect(deployment.status, JSON.stringify(deployment.body)).toBe(201);
    const payload = pushPayload({ repo: 'acme/agent', htmlUrl: `${github.url}/acme/agent`, installationId: installation });
    // Signed with the secret GitHub generated: accepted, and it builds.
    const pushed = await deliver(server.url, 'push', payload, { secret: github.webhookSecret! });
    expect(pushed.status).toBe(202);
    const revision = await eventually(async () =>
      (await revisionsOf(api, deployment.body.id)).find((r) => r.source_revision_config.repo_commit_sha === payload.after),
    );
    await revisionReaches(api, deployment.body.id, revision.id, ['DEPLOYED'], 30_000);
    // Tokens minted with the stored key reached GitHub: the push is reported there.
    await eventually(
      async () => (github.deployments.find((d) => d.body.ref === payload.after)?.statuses.at(-1)?.state === 'success' ? true : undefined),
      30_000,
    );
    expect((await deliver(server.url, 'push', payload, { secret: 'not-the-generated-one' })).status).toBe(401);

    // The environment's own webhook secret wins over the stored one.
    await server.kill('SIGTERM');
    server = await server.restart({ ...env(), GITHUB_WEBHOOK_SECRET: 'from-the-environment' });
    expect((await deliver(server.url, 'push', payload, { secret: github.webhookSecret! })).status).toBe(401);
    expect((await deliver(server.url, 'push', payload, { secret: 'from-the-environment' })).status).toBe(202);
    expect(github.problems()).toEqual([]);
  });
});
