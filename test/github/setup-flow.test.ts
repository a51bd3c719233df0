import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { serverSql } from './sql.ts';
import { GithubStandIn } from './stand-in.ts';

/**
 * Contract §12, "Linking proves ownership": the real server against the GitHub stand-in. Only an
 * installation the installer's own authorization shows is linked; everything else links nothing.
 */
describe('linking a GitHub installation proves who owns it', () => {
  let github: GithubStandIn;
  let server: ServerProcess;
  let api: Api;
  let acme: number;
  let other: number;

  beforeAll(async () => {
    github = await new GithubStandIn().start();
    acme = github.install({ login: 'acme', id: 501, type: 'Organization' }, ['acme/agent'], ['alice']);
    other = github.install({ login: 'victim', id: 777, type: 'Organization' }, ['victim/secret'], ['mallory']);
    server = await startServerProcess({ ...github.serverEnv(), RECONCILE_INTERVAL_MS: '0' });
    api = apiClient(server.url, server.apiKey);
  });

  afterAll(async () => {
    await server?.kill('SIGTERM');
    await github?.stop();
  });

  const setup = (query: Record<string, string>) => fetch(`${server.url}/v1/integrations/github/setup?${new URLSearchParams(query)}`);
  const linked = async () => (await api.get('/v1/integrations/github/install')).body as Array<{ id: string; installation_id: number; name: string }>;

  it('refuses a bare installation_id once App settings are set, naming the install URL route', async () => {
    const bare = await api.post('/v1/integrations/github', { installation_id: acme, name: 'acme' });
    expect(bare.status).toBe(400);
    expect(bare.body.detail).toContain('/v1/integrations/github/install-url');
    expect(await linked()).toEqual([]);
  });

  it('answers the install page with a state, and links nothing for a spoofed installation_id', async () => {
    const made = await api.post('/v1/integrations/github/install-url', { name: 'acme-prod' });
    expect(made.status).toBe(200);
    expect(made.body.url).toBe(`${github.url}/apps/${github.slug}/installations/new?state=${encodeURIComponent(made.body.state)}`);
    // Alice is real, her code is real, but the installation she names is someone else's.
    const spoofed = await setup({ installation_id: String(other), setup_action: 'install', state: made.body.state, code: github.codeFor('alice') });
    expect(spoofed.status).toBe(400);
    expect(await spoofed.text()).toContain('not one of yours');
    expect(await linked()).toEqual([]);
    // The state was spent by the attempt: the right installation with it now links nothing either.
    const replayed = await setup({ installation_id: String(acme), setup_action: 'install', state: made.body.state, code: github.codeFor('alice') });
    expect(replayed.status).toBe(400);
    expect(await replayed.text()).toContain('already used');
    expect(await linked()).toEqual([]);
  });

  it("links nothing with a forged, expired or missing state, or without the installer's code", async () => {
    const forged = await setup({ installation_id: String(acme), setup_action: 'install', state: 'abc.def', code: github.codeFor('alice') });
    expect(forged.status).toBe(400);
    const expiring = await api.post('/v1/integrations/github/install-url', {});
    const sql = serverSql(server);
    try {
      expect(await sql.run('UPDATE github_setup_states SET expires_at = ?', new Date(Date.now() - 1000).toISOString())).toBeGreaterThan(0);
    } finally {
      await sql.close();
    }
    const expired = await setup({ installation_id: String(acme), setup_action: 'install', state: expiring.body.state, code: github.codeFor('alice') });
    expect(expired.status).toBe(400);
    expect(await expired.text()).toContain('expired');
    const noCode = await api.post('/v1/integrations/github/install-url', {});
    expect((await setup({ installation_id: String(acme), setup_action: 'install', state: noCode.body.state })).status).toBe(400);
    expect((await setup({ installation_id: String(acme), setup_action: 'install' })).status).toBe(400);
    expect(await linked()).toEqual([]);
  });

  it('links a proven installation once, recording the account GitHub reports', async () => {
    const made = await api.post('/v1/integrations/github/install-url', { name: 'acme-prod' });
    const page = await setup({ installation_id: String(acme), setup_action: 'install', state: made.body.state, code: github.codeFor('alice') });
    expect(page.status, await page.clone().text()).toBe(200);
    const links = await linked();
    expect(links).toEqual([{ id: expect.any(String), installation_id: acme, name: 'acme-prod' }]);
    const sql = serverSql(server);
    try {
      const accounts = await sql.all('SELECT integration_id, account_login, account_id, account_type FROM github_installation_accounts');
      expect(accounts).toEqual([{ integration_id: links[0]!.id, account_login: 'acme', account_id: 501, account_type: 'Organization' }]);
    } finally {
      await sql.close();
    }
    // The same link again: the state is spent.
    expect((await setup({ installation_id: String(acme), setup_action: 'install', state: made.body.state, code: github.codeFor('alice') })).status).toBe(400);
    // App JWT calls were made as GitHub requires, and nothing sent or answered strayed from GitHub's description.
    expect(github.exchanges.filter((e) => e.template === '/app/installations/{installation_id}').every((e) => e.auth === 'Bearer')).toBe(true);
    expect(github.problems()).toEqual([]);
  });
});
