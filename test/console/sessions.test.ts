import { createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/** The server's clock, moved by the test: twelve hours pass without waiting for them. */
function movableClock() {
  let offsetMs = 0;
  return {
    now: () => new Date(Date.now() + offsetMs).toISOString(),
    advance: (ms: number) => {
      offsetMs += ms;
    },
  };
}

/** A browser in one test: keeps cookies, sends forms, never follows redirects (so they can be checked). */
function browser(app: { request: (url: string, init?: RequestInit) => Response | Promise<Response> }, base = 'http://localhost') {
  const cookies = new Map<string, string>();
  async function send(method: string, path: string, form?: Record<string, string>, headers: Record<string, string> = {}) {
    const response = await app.request(base + path, {
      method,
      headers: {
        accept: 'text/html',
        cookie: [...cookies].map(([name, value]) => `${name}=${value}`).join('; '),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...headers,
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const [name, value] = pair!.split('=');
      if (/max-age=0/i.test(line) || value === '') cookies.delete(name!);
      else cookies.set(name!, value!);
    }
    return { status: response.status, location: response.headers.get('location'), text: await response.text(), headers: response.headers };
  }
  return {
    cookies,
    get: (path: string, headers?: Record<string, string>) => send('GET', path, undefined, headers),
    post: (path: string, form: Record<string, string>, headers?: Record<string, string>) => send('POST', path, form, headers),
    /** The CSRF token a page's forms carry. */
    csrfOf: (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1] ?? '',
    async signIn(key: string) {
      const form = await send('GET', '/console/sign-in');
      return send('POST', '/console/sign-in', { key, csrf: /name="csrf" value="([^"]+)"/.exec(form.text)![1]! });
    },
  };
}

describe('console sessions', () => {
  const clock = movableClock();
  let t: Awaited<ReturnType<typeof inProcessApp>>;

  beforeAll(async () => {
    t = await inProcessApp({ clock });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('sends a browser without a session to sign in, and back to the page it asked for afterwards', async () => {
    const b = browser(t.app);
    const page = await b.get('/console/listeners');
    expect(page.status).toBe(303);
    expect(page.location).toBe('/console/sign-in?next=%2Fconsole%2Flisteners');
    const form = await b.get(page.location!);
    expect(form.text).toContain('name="next" value="/console/listeners"');
    const signedIn = await b.post('/console/sign-in', { key: t.apiKey, csrf: b.csrfOf(form.text), next: '/console/listeners' });
    expect(signedIn.location).toBe('/console/listeners');
    // A `next` that leaves the console is not followed.
    const other = browser(t.app);
    const otherForm = await other.get('/console/sign-in?next=https://evil.example/');
    expect(otherForm.text).not.toContain('evil.example');
  });

  it('refuses a wrong key with a clear page and no session; a right key gets an HttpOnly, SameSite=Strict cookie of at most 12 h', async () => {
    const b = browser(t.app);
    const wrong = await b.signIn('cpk_wrong-key');
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('That API key is not valid');
    expect(b.cookies.has('console_session')).toBe(false);

    const right = await b.signIn(t.apiKey);
    expect(right.status).toBe(303);
    expect(right.location).toBe('/console');
    const cookie = right.headers.getSetCookie().find((line) => line.startsWith('console_session='))!;
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).not.toMatch(/; Secure/);
    const expires = Date.parse(/Expires=([^;]+)/.exec(cookie)![1]!);
    expect(expires - Date.parse(clock.now())).toBeLessThanOrEqual(12 * 3600 * 1000);
    // The cookie holds a random token, never the key; the database holds only the token's hash.
    const token = b.cookies.get('console_session')!;
    expect(token).not.toContain(t.apiKey);
    const rows = await t.sql.all<{ token_hash: string }>('SELECT token_hash FROM console_sessions');
    const hash = createHash('sha256').update(token).digest('hex');
    expect(rows.map((row) => row.token_hash)).toContain(hash);
    expect(JSON.stringify(rows)).not.toContain(token);
    const page = await b.get('/console');
    expect(page.status).toBe(200);
    // Only our own script and styles run, no other site frames the console, nothing is cached.
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self'.*frame-ancestors 'none'/);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('cache-control')).toBe('no-store');
  });

  it('marks the cookie Secure when the console is reached over https', async () => {
    const b = browser(t.app, 'https://localhost');
    const right = await b.signIn(t.apiKey);
    expect(right.headers.getSetCookie().find((line) => line.startsWith('console_session='))).toMatch(/; Secure/);
  });

  it('refuses a sign-in form that did not come from the console (no sign-in token)', async () => {
    const b = browser(t.app);
    const forged = await b.post('/console/sign-in', { key: t.apiKey, csrf: 'made-up' });
    expect(forged.status).toBe(403);
    expect(b.cookies.has('console_session')).toBe(false);
  });

  it('refuses a state-changing form without its CSRF token, and changes nothing', async () => {
    const b = browser(t.app);
    await b.signIn(t.apiKey);
    const before = (await t.api.get('/v1/api-keys')).body.length;
    for (const csrf of [undefined, 'f'.repeat(64), 'not-hex']) {
      const refused = await b.post('/console/api-keys', { description: 'forged', scope: 'workspace', ...(csrf ? { csrf } : {}) });
      expect(refused.status).toBe(403);
      expect(refused.text).toContain('CSRF');
    }
    // From another site, even with the token.
    const page = await b.get('/console/api-keys');
    const crossSite = await b.post('/console/api-keys', { description: 'forged', csrf: b.csrfOf(page.text) }, { origin: 'https://evil.example' });
    expect(crossSite.status).toBe(403);
    const malformed = await b.post('/console/api-keys', { description: 'forged', csrf: b.csrfOf(page.text) }, { origin: 'http://[bad' });
    expect(malformed.status).toBe(403);
    expect((await t.api.get('/v1/api-keys')).body.length).toBe(before);
  });

  it('creates a key shown once, and revoking the key a session was signed in with ends that session', async () => {
    const b = browser(t.app);
    await b.signIn(t.apiKey);
    const page = await b.get('/console/api-keys');
    const created = await b.post('/console/api-keys', { description: 'console made', scope: 'organization', csrf: b.csrfOf(page.text) });
    expect(created.status).toBe(200);
    expect(created.headers.get('cache-control')).toBe('no-store');
    const key = /id="created-key" readonly value="([^"]+)"/.exec(created.text)![1]!;
    expect((await t.client(key).get('/v2/deployments')).status).toBe(200);
    // Shown once: the list afterwards has its description, never its value.
    const list = await b.get('/console/api-keys');
    expect(list.text).toContain('console made');
    expect(list.text).not.toContain(key);

    const second = browser(t.app);
    expect((await second.signIn(key)).status).toBe(303);
    expect((await second.get('/console')).status).toBe(200);
    const keyId = (await t.api.get('/v1/api-keys')).body.find((k: { description: string }) => k.description === 'console made').id;
    expect((await t.api.delete(`/v1/api-keys/${keyId}`)).status).toBe(204);
    const after = await second.get('/console');
    expect(after.status).toBe(303);
    expect(after.location).toMatch(/^\/console\/sign-in/);
  });

  it('signs out: the cookie is cleared and the token no longer works', async () => {
    const b = browser(t.app);
    await b.signIn(t.apiKey);
    const token = b.cookies.get('console_session')!;
    const page = await b.get('/console');
    const out = await b.post('/console/sign-out', { csrf: b.csrfOf(page.text) });
    expect(out.location).toBe('/console/sign-in');
    expect(b.cookies.has('console_session')).toBe(false);
    const replayed = await t.app.request('http://localhost/console', { headers: { cookie: `console_session=${token}` } });
    expect(replayed.status).toBe(303);
  });

  it('records each sign-in and sign-out in the audit log, with the key, the address and the user agent', async () => {
    const b = browser(t.app);
    await b.signIn(t.apiKey);
    const page = await b.get('/console', { 'user-agent': 'audit-probe/1.0' });
    await b.post('/console/sign-out', { csrf: b.csrfOf(page.text) }, { 'user-agent': 'audit-probe/1.0' });
    const { body } = await t.api.get('/v1/audit-events?limit=10');
    const actions = body.resources.filter((entry: { resource_type: string }) => entry.resource_type === 'console_session');
    expect(actions.map((entry: { action: string }) => entry.action).slice(0, 2)).toEqual(['sign_out', 'sign_in']);
    const signOut = actions[0];
    expect(signOut.actor_kind).toBe('api_key');
    expect(signOut.user_agent).toBe('audit-probe/1.0');
    expect(signOut.outcome).toBe('succeeded');
    expect(JSON.stringify(actions)).not.toContain(t.apiKey);
  });

  it('interrupts a revision in progress from its page, after asking', async () => {
    // Stages of a minute: the revision is still in progress when the form is sent.
    const slow = await inProcessApp({ stageMs: 60_000 });
    try {
      const fx = await workspaceFixtures(slow.api);
      const created = await slow.api.post('/v2/deployments', githubBody(uniqueName('interrupt'), fx.integrationId));
      expect(created.status).toBe(201);
      const b = browser(slow.app);
      await b.signIn(slow.apiKey);
      const path = `/console/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}/interrupt`;
      const question = await b.get(path);
      expect(question.status).toBe(200);
      expect(question.text).toContain('Interrupt this revision');
      // Asking changed nothing; confirming interrupts it.
      expect((await slow.api.get(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`)).body.status).not.toBe('INTERRUPTED');
      const done = await b.post(path, { csrf: b.csrfOf(question.text) });
      expect(done.status).toBe(303);
      expect(done.location).toBe(`/console/deployments/${created.body.id}?done=interrupt`);
      const revision = await revisionReaches(slow.api, created.body.id, created.body.latest_revision_id, ['INTERRUPTED'], 10_000);
      expect(revision.status).toBe('INTERRUPTED');
    } finally {
      await slow.close();
    }
  });

  it('ends a session after 12 hours', async () => {
    const b = browser(t.app);
    await b.signIn(t.apiKey);
    clock.advance(12 * 3600 * 1000 - 60_000);
    expect((await b.get('/console')).status).toBe(200);
    clock.advance(61_000);
    expect((await b.get('/console')).status).toBe(303);
  });

  it("shows secret names but never their values, and never another workspace's deployments", async () => {
    const fx = await workspaceFixtures(t.api);
    const secretValue = `sv-${crypto.randomUUID()}`;
    const name = uniqueName('secretive');
    const created = await t.api.post('/v2/deployments', githubBody(name, fx.integrationId, { secrets: [{ name: 'VERY_SECRET', value: secretValue }] }));
    expect(created.status).toBe(201);
    const id = created.body.id;
    await revisionReaches(t.api, id, created.body.latest_revision_id, ['DEPLOYED']);

    const b = browser(t.app);
    await b.signIn(t.apiKey);
    const pages = [
      '/console',
      `/console/deployments/${id}`,
      `/console/deployments/${id}/revisions/${created.body.latest_revision_id}`,
      '/console/listeners',
      '/console/integrations',
      '/console/api-keys',
      '/console/trust',
    ];
    for (const path of pages) {
      const page = await b.get(path);
      expect(page.status, path).toBe(200);
      expect(page.text, path).not.toContain(secretValue);
      expect(page.text, path).not.toContain(t.apiKey);
    }
    expect((await b.get(`/console/deployments/${id}`)).text).toContain('VERY_SECRET');

    // A key of another workspace of the organization sees none of it.
    const workspace = await t.api.post('/v1/workspaces', { name: `other-${Date.now()}` });
    const otherKey = (await t.api.post('/v1/api-keys', { workspace_id: workspace.body.id, description: 'other ws' })).body.key;
    const other = browser(t.app);
    await other.signIn(otherKey);
    expect((await other.get('/console')).text).not.toContain(name);
    const hidden = await other.get(`/console/deployments/${id}`);
    expect(hidden.status).toBe(404);
    expect(hidden.text).not.toContain(name);
    const page = await other.get('/console');
    const refused = await other.post(`/console/deployments/${id}/delete`, { csrf: other.csrfOf(page.text) });
    expect(refused.status).toBe(404);
    expect((await t.api.get(`/v2/deployments/${id}`)).body.status).not.toBe('AWAITING_DELETE');

    // The organization key picks that workspace from the console.
    const org = browser(t.app);
    const signedIn = await org.signIn(t.apiKey);
    expect(signedIn.location).toBe('/console/workspaces');
    const picker = await org.get('/console/workspaces');
    expect((await org.post('/console/workspaces', { workspace_id: workspace.body.id, csrf: org.csrfOf(picker.text) })).status).toBe(303);
    expect((await org.get('/console')).text).not.toContain(name);
    expect((await org.post('/console/workspaces', { workspace_id: crypto.randomUUID(), csrf: org.csrfOf(picker.text) })).status).toBe(404);
  });

  it('adds a trust entry (checked by the API schema) and removes it, from the page', async () => {
    const b = browser(t.app);
    await b.signIn(t.apiKey);
    const page = await b.get('/console/trust');
    const csrf = b.csrfOf(page.text);
    const refused = await b.post('/console/trust', { repository_id: 'abc', repository_owner_id: '7', csrf });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('repository_id');
    expect((await t.api.get(`/v1/workspaces/${t.workspaceId}/github-trust`)).body).toEqual([]);
    const added = await b.post('/console/trust', { repository_id: '4242', repository_owner_id: '77', ref: 'refs/heads/main', csrf });
    expect(added.location).toBe('/console/trust?done=trusted');
    const [entry] = (await t.api.get(`/v1/workspaces/${t.workspaceId}/github-trust`)).body;
    expect(entry).toMatchObject({ repository_id: 4242, repository_owner_id: 77, ref: 'refs/heads/main' });
    expect((await b.get('/console/trust')).text).toContain('refs/heads/main');
    const removed = await b.post(`/console/trust/${entry.id}/remove`, { csrf });
    expect(removed.location).toBe('/console/trust?done=untrusted');
    expect((await t.api.get(`/v1/workspaces/${t.workspaceId}/github-trust`)).body).toEqual([]);
    expect((await b.post(`/console/trust/${entry.id}/remove`, { csrf })).status).toBe(404);
  });

  it("pages through a revision's log 1,000 lines at a time, escaping what the lines say", async () => {
    const fx = await workspaceFixtures(t.api);
    const created = await t.api.post('/v2/deployments', githubBody(uniqueName('chatty'), fx.integrationId));
    const { id, latest_revision_id: revisionId } = created.body;
    await revisionReaches(t.api, id, revisionId, ['DEPLOYED']);
    // Lines as an agent's build would write them (straight into the store: the sandbox writes few).
    const lines = Array.from({ length: 1500 }, (_, i) => ({ type: 'build' as const, level: 'info' as const, message: `step ${i} <b>done</b>` }));
    await t.store.appendLogs(revisionId, lines, new Date().toISOString());
    const b = browser(t.app);
    await b.signIn(t.apiKey);
    const first = await b.get(`/console/deployments/${id}/revisions/${revisionId}`);
    expect(first.text).toContain('step 0 &lt;b&gt;done&lt;/b&gt;');
    expect(first.text).not.toContain('<b>done</b>');
    expect(first.text).not.toContain('step 1499 ');
    const later = /href="([^"]+build_from=\d+)#build-h">Later lines/.exec(first.text)![1]!.replaceAll('&amp;', '&');
    const second = await b.get(later);
    expect(second.text).toContain('step 1499 ');
    expect(second.text).toContain('From the start');
    expect((await b.get(`/console/deployments/${id}/revisions/${revisionId}?build_from=-3`)).status).toBe(200);
  });

  it.skipIf(process.env.TEST_BACKEND === 'postgres')('keeps a session across a restart of the server (it lives in the database)', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'console-restart-')), 'control-plane.db');
    const first = await inProcessApp({ path });
    const b = browser(first.app);
    await b.signIn(first.apiKey);
    expect((await b.get('/console')).status).toBe(200);
    await first.stopCleanly();
    const second = await inProcessApp({ path });
    try {
      const again = await second.app.request('http://localhost/console', { headers: { cookie: `console_session=${b.cookies.get('console_session')}` } });
      expect(again.status).toBe(200);
    } finally {
      await second.close();
    }
  });

  it('answers bad addresses and bad forms with a page, never a 500', async () => {
    const b = browser(t.app);
    await b.signIn(t.apiKey);
    const page = await b.get('/console');
    const csrf = b.csrfOf(page.text);
    for (const path of [
      '/console/deployments/not-a-uuid',
      `/console/deployments/${crypto.randomUUID()}`,
      '/console/nothing-here',
      '/console/deployments/x/revisions/y',
    ]) {
      const answer = await b.get(path);
      expect(answer.status, path).toBe(404);
      expect(answer.headers.get('content-type'), path).toMatch(/text\/html/);
    }
    expect((await b.get('/console?offset=-5&name_contains=%00')).status).not.toBe(500);
    expect((await b.post('/console/workspaces', { workspace_id: 'nope', csrf })).status).toBe(400);
    expect((await b.post('/console/api-keys', { description: 'x'.repeat(20_000), csrf })).status).toBe(413);
    expect((await b.get('/console/live?deployment_id=zzz')).status).toBe(404);
    // `/console/github/*` is the GitHub App module's: neither this module's pages nor its CSRF check answer there.
    for (const answer of [await b.get('/console/github/setup'), await b.post('/console/github/setup', { anything: 'x' })]) {
      expect(answer.status).toBe(404);
      expect(answer.headers.get('content-type')).toMatch(/application\/json/);
      expect(answer.headers.get('content-security-policy')).toBeNull();
    }
  });

  it('sends browsers from our links and the hosted CLI link to the console, and keeps the API as it was for scripts', async () => {
    const id = crypto.randomUUID();
    const rid = crypto.randomUUID();
    const html = { accept: 'text/html,application/xhtml+xml' };
    const root = await t.app.request('/', { headers: html });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/console');
    const hosted = await t.app.request(`/o/${crypto.randomUUID()}/host/deployments/${id}`, { headers: html });
    expect(hosted.headers.get('location')).toBe(`/console/deployments/${id}`);
    const status = await t.app.request(`/v2/deployments/${id}/revisions/${rid}/logs?type=build`, { headers: html });
    expect(status.headers.get('location')).toBe(`/console/deployments/${id}/revisions/${rid}`);
    // With a key, or asking for JSON, the API answers as before.
    expect((await t.app.request(`/v2/deployments/${id}`, { headers: { ...html, 'x-api-key': t.apiKey } })).status).toBe(404);
    expect((await t.app.request(`/v2/deployments/${id}`)).status).toBe(401);
  });
});
