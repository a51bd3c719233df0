import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { confirmationForm, confirmLink, open, openSetup } from './link.ts';
import { serverSql } from './sql.ts';
import { GithubStandIn } from './stand-in.ts';

/**
 * Contract §12 "Linking proves ownership" and §19 "Every way in links", "No forwarded links": the
 * real server against the GitHub stand-in, a browser played by fetch. Only an installation the
 * installer's own authorization shows is linked, from whichever way GitHub sends them back, and
 * only once they confirm on a page naming the workspace.
 */
describe('linking a GitHub installation proves who owns it, from every way in', () => {
  let github: GithubStandIn;
  let server: ServerProcess;
  let api: Api;
  let acme: number;
  let other: number;

  beforeAll(async () => {
    github = await new GithubStandIn().start();
    acme = github.install({ login: 'acme', id: 501, type: 'Organization' }, ['acme/agent'], ['alice', 'olivia']);
    other = github.install({ login: 'victim', id: 777, type: 'Organization' }, ['victim/secret'], ['victor']);
    server = await startServerProcess({ ...github.serverEnv(), RECONCILE_INTERVAL_MS: '0' });
    api = apiClient(server.url, server.apiKey);
  });

  afterAll(async () => {
    await server?.kill('SIGTERM');
    await github?.stop();
  });

  const linked = async (client = api) =>
    (await client.get('/v1/integrations/github/install')).body as Array<{ id: string; installation_id: number; name: string }>;
  const installUrl = async (name?: string, client = api) => {
    const made = await client.post('/v1/integrations/github/install-url', name ? { name } : {});
    expect(made.status).toBe(200);
    return made.body as { url: string; state: string };
  };
  const unlinkAll = async (client = api) => {
    for (const link of await linked(client)) expect((await client.delete(`/v1/integrations/github/${link.id}`)).status).toBe(204);
  };
  const setupStates = async () => {
    const sql = serverSql(server);
    try {
      return Number((await sql.all<{ n: number | string }>('SELECT count(*) AS n FROM github_setup_states'))[0]!.n);
    } finally {
      await sql.close();
    }
  };

  it('refuses a bare installation_id once App settings are set, naming the install URL route', async () => {
    const bare = await api.post('/v1/integrations/github', { installation_id: acme, name: 'acme' });
    expect(bare.status).toBe(400);
    expect(bare.body.detail).toContain('/v1/integrations/github/install-url');
    expect(await linked()).toEqual([]);
  });

  it('links nothing for a spoofed installation_id, and the state stays usable for the right one', async () => {
    const made = await installUrl('acme-prod');
    // The stand-in is a GitHub Enterprise Server (its API under /api/v3): GHES's install path.
    expect(made.url).toBe(`${github.url}/github-apps/${github.slug}/installations/new?state=${encodeURIComponent(made.state)}`);
    // Alice is real, her code is real, but the installation she names is someone else's.
    const spoofed = await openSetup(server.url, github, 'alice', {
      installation_id: String(other),
      setup_action: 'install',
      state: made.state,
      code: github.codeFor('alice'),
    });
    expect(spoofed.status).toBe(400);
    expect(spoofed.html).toContain('not one of yours');
    expect(await linked()).toEqual([]);
    // Nothing was linked, so nothing was used up: the same state with her own installation links.
    const page = await openSetup(server.url, github, 'alice', {
      installation_id: String(acme),
      setup_action: 'install',
      state: made.state,
      code: github.codeFor('alice'),
    });
    expect(page.status, page.html).toBe(200);
    // The page names both sides before anything is linked.
    expect(page.html).toContain('acme');
    expect(page.html).toContain('acme-prod');
    expect(page.html).toMatch(/workspace <strong>[^<]+<\/strong>/);
    expect(await linked()).toEqual([]);
    const done = await confirmLink(server.url, confirmationForm(page));
    expect(done.status, done.html).toBe(200);
    expect(await linked()).toEqual([{ id: expect.any(String), installation_id: acme, name: 'acme-prod' }]);
    const sql = serverSql(server);
    try {
      const accounts = await sql.all('SELECT account_login, account_id, account_type FROM github_installation_accounts');
      expect(accounts).toEqual([{ account_login: 'acme', account_id: 501, account_type: 'Organization' }]);
    } finally {
      await sql.close();
    }
    // Used up with the link: the state, and the confirmation, link nothing again.
    const replayed = await openSetup(server.url, github, 'alice', {
      installation_id: String(acme),
      setup_action: 'install',
      state: made.state,
      code: github.codeFor('alice'),
    });
    expect(replayed.status).toBe(400);
    expect(replayed.html).toContain('already used');
    expect((await confirmLink(server.url, confirmationForm(page))).status).toBe(400);
    expect(github.exchanges.filter((e) => e.template === '/app/installations/{installation_id}').every((e) => e.auth === 'Bearer')).toBe(true);
    await unlinkAll();
  });

  it('links nothing with a forged or expired state', async () => {
    const forged = await open(`${server.url}/v1/integrations/github/setup?installation_id=${acme}&setup_action=install&state=abc.def&code=x`);
    expect(forged.status).toBe(400);
    const expiring = await installUrl();
    const sql = serverSql(server);
    try {
      expect(await sql.run('UPDATE github_setup_states SET expires_at = ?', new Date(Date.now() - 1000).toISOString())).toBeGreaterThan(0);
    } finally {
      await sql.close();
    }
    const expired = await openSetup(server.url, github, 'alice', { installation_id: String(acme), setup_action: 'install', state: expiring.state });
    expect(expired.status).toBe(400);
    expect(expired.html).toContain('expired');
    expect(await linked()).toEqual([]);
  });

  it("links an update that comes without a code through GitHub's authorization, with a new single-use state", async () => {
    const made = await installUrl('updated');
    const first = await open(
      `${server.url}/v1/integrations/github/setup?${new URLSearchParams({ installation_id: String(acme), setup_action: 'update', state: made.state })}`,
    );
    expect(first.status).toBe(302);
    const authorize = new URL(first.location!);
    expect(`${authorize.origin}${authorize.pathname}`).toBe(`${github.url}/login/oauth/authorize`);
    expect(authorize.searchParams.get('client_id')).toBe(github.clientId);
    expect(authorize.searchParams.get('redirect_uri')).toMatch(/\/v1\/integrations\/github\/setup$/);
    // A state of its own, not the install URL's.
    expect(authorize.searchParams.get('state')).not.toBe(made.state);
    const page = await openSetup(server.url, github, 'alice', { installation_id: String(acme), setup_action: 'update', state: made.state });
    expect((await confirmLink(server.url, confirmationForm(page))).status).toBe(200);
    expect((await linked()).map((l) => l.name)).toEqual(['updated']);
    // The authorization's state is single-use too.
    const again = await open(github.asBrowserOf('alice', authorize));
    const back = await open(again.location!);
    expect(back.status).toBe(400);
    await unlinkAll();
  });

  it("links an installation made from GitHub's own Install button (no state, no code) to the workspace of the API key given once", async () => {
    const page = await openSetup(server.url, github, 'alice', { installation_id: String(acme), setup_action: 'install' });
    expect(page.status, page.html).toBe(200);
    expect(page.html).toContain('type="password"');
    expect(page.html).toContain('autocomplete="off"');
    const form = confirmationForm(page);
    // Without a key, or with a wrong one, nothing.
    expect((await confirmLink(server.url, form)).html).toContain('API key');
    expect((await confirmLink(server.url, { ...form, api_key: 'lsv2_not_a_key' })).status).toBe(400);
    expect(await linked()).toEqual([]);
    const done = await confirmLink(server.url, { ...form, api_key: server.apiKey });
    expect(done.status, done.html).toBe(200);
    expect((await linked()).map((l) => [l.installation_id, l.name])).toEqual([[acme, 'acme']]);
    expect(server.output()).not.toContain(server.apiKey);
  });

  it('relinks after an unlink, and links the same installation to a second workspace', async () => {
    await unlinkAll();
    expect(await linked()).toEqual([]);
    const made = await installUrl('relinked');
    const page = await openSetup(server.url, github, 'alice', { installation_id: String(acme), setup_action: 'update', state: made.state });
    expect((await confirmLink(server.url, confirmationForm(page))).status).toBe(200);
    expect((await linked()).map((l) => l.name)).toEqual(['relinked']);

    const workspace = await api.post('/v1/workspaces', { name: `second-${crypto.randomUUID().slice(0, 8)}` });
    expect(workspace.status).toBe(201);
    const second = apiClient(server.url, server.apiKey, { 'x-tenant-id': workspace.body.id });
    const there = await installUrl('second', second);
    const secondPage = await openSetup(server.url, github, 'olivia', { installation_id: String(acme), setup_action: 'update', state: there.state });
    expect(secondPage.html).toContain(workspace.body.name);
    expect((await confirmLink(server.url, confirmationForm(secondPage))).status).toBe(200);
    expect((await linked(second)).map((l) => [l.installation_id, l.name])).toEqual([[acme, 'second']]);
    expect((await linked()).map((l) => l.name)).toEqual(['relinked']);
    await unlinkAll(second);
    await unlinkAll();
  });

  it('keeps the state through a GitHub 5xx and links on the retry the page offers', async () => {
    const made = await installUrl('retried');
    github.fail({ method: 'GET', path: /^\/user\/installations/, status: 502, times: 1 });
    const failed = await openSetup(server.url, github, 'alice', {
      installation_id: String(acme),
      setup_action: 'install',
      state: made.state,
      code: github.codeFor('alice'),
    });
    expect(failed.status).toBe(502);
    const retry = /href="([^"]+)"/.exec(failed.html)?.[1]?.replace(/&#38;/g, '&');
    expect(retry).toBeDefined();
    expect(await setupStates()).toBeGreaterThan(0);
    const page = await openSetup(server.url, github, 'alice', Object.fromEntries(new URL(retry!).searchParams));
    expect((await confirmLink(server.url, confirmationForm(page))).status).toBe(200);
    expect((await linked()).map((l) => l.name)).toEqual(['retried']);
    await unlinkAll();
  });

  it("waits for an organization owner's approval, then links from the requester's install URL", async () => {
    const made = await installUrl('approved');
    const requested = await openSetup(server.url, github, 'alice', { setup_action: 'request', state: made.state });
    expect(requested.status).toBe(200);
    expect(requested.html).toContain('must approve');
    expect(await linked()).toEqual([]);
    // The owner approves on GitHub; the requester opens the same install URL again: GitHub says it is installed (update).
    const page = await openSetup(server.url, github, 'alice', { installation_id: String(acme), setup_action: 'update', state: made.state });
    expect((await confirmLink(server.url, confirmationForm(page))).status).toBe(200);
    expect((await linked()).map((l) => l.name)).toEqual(['approved']);
    await unlinkAll();
  });

  it("links nothing from a forwarded install link: its recipient is shown the sender's workspace, and the sender cannot confirm", async () => {
    // Mallory's workspace asks for an install URL and forwards it to Victor, an owner of `victim`.
    const forwarded = await installUrl('mallory');
    const victimsPage = await openSetup(server.url, github, 'victor', {
      installation_id: String(other),
      setup_action: 'install',
      state: forwarded.state,
      code: github.codeFor('victor'),
    });
    expect(victimsPage.status).toBe(200);
    expect(victimsPage.html).toContain('victim');
    expect(victimsPage.html).toContain('mallory');
    expect(victimsPage.html).toContain('someone who sent it to you');
    // Victor reads it and does not confirm. Mallory knows the attempt (she could guess nothing else) but not the page's token.
    const { attempt } = confirmationForm(victimsPage);
    expect((await confirmLink(server.url, { attempt, confirm: 'guessed' })).status).toBe(400);
    expect((await confirmLink(server.url, { attempt })).status).toBe(400);
    // From her own browser, the same state proves nothing about Victor's installation.
    const hers = await openSetup(server.url, github, 'mallory', { installation_id: String(other), setup_action: 'update', state: forwarded.state });
    expect(hers.status).toBe(400);
    expect(await linked()).toEqual([]);
    expect(github.problems()).toEqual([]);
  });
});
