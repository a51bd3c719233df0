import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { axeViolations, chromiumInstalled, launchChromium } from '../helpers/chromium.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { ROOT } from '../helpers/listening-child.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

/**
 * The console in a real Chromium against a real server process on a loopback port (the sandbox
 * data plane is the server's simulated one). One browser for the file; a fresh context (an empty
 * cookie jar) per person. `CONSOLE_SCREENSHOTS=1` also writes the pictures in docs/console/.
 */
describe.skipIf(!chromiumInstalled())('the console in a real browser', () => {
  let server: ServerProcess;
  let api: Api;
  let browser: Browser;
  const secretValue = `sv-${crypto.randomUUID()}`;
  let deployment: { id: string; name: string; firstRevision: string; secondRevision: string };
  const screenshots = process.env.CONSOLE_SCREENSHOTS ? join(ROOT, 'docs/console') : undefined;

  beforeAll(async () => {
    [server, browser] = await Promise.all([startServerProcess({ SANDBOX_STAGE_MS: '50' }), launchChromium()]);
    api = apiClient(server.url, server.apiKey);
    const fx = await workspaceFixtures(api);
    const name = uniqueName('support-agent');
    const created = await api.post('/v2/deployments', githubBody(name, fx.integrationId, { secrets: [{ name: 'OPENAI_API_KEY', value: secretValue }] }));
    expect(created.status).toBe(201);
    await revisionReaches(api, created.body.id, created.body.latest_revision_id, ['DEPLOYED']);
    const patched = await api.patch(`/v2/deployments/${created.body.id}`, { source_revision_config: { repo_ref: 'release' } });
    await revisionReaches(api, created.body.id, patched.body.latest_revision_id, ['DEPLOYED']);
    deployment = { id: created.body.id, name, firstRevision: created.body.latest_revision_id, secondRevision: patched.body.latest_revision_id };
    if (screenshots) mkdirSync(screenshots, { recursive: true });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.kill();
  });

  async function signedInPage(options: { javaScriptEnabled?: boolean; bypassCSP?: boolean; viewport?: { width: number; height: number } } = {}) {
    const context = await browser.newContext({ baseURL: server.url, ...options });
    const page = await context.newPage();
    await page.goto('/console');
    await page.getByLabel('API key').fill(server.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/console$/);
    return { context, page };
  }

  function pagesToVisit() {
    const d = `/console/deployments/${deployment.id}`;
    return [
      ['deployments', '/console'],
      ['deployment', d],
      ['revision', `${d}/revisions/${deployment.firstRevision}`],
      ['listeners', '/console/listeners'],
      ['integrations', '/console/integrations'],
      ['api-keys', '/console/api-keys'],
      ['trust', '/console/trust'],
    ] as const;
  }

  it('signs in with the right key only; the session cookie is HttpOnly and SameSite=Strict, and the key is kept nowhere in the browser', async () => {
    const context = await browser.newContext({ baseURL: server.url });
    const page = await context.newPage();
    await page.goto('/console/api-keys');
    await expect.poll(() => new URL(page.url()).pathname).toBe('/console/sign-in');
    await page.getByLabel('API key').fill('cpk_not-a-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('not valid');
    expect((await context.cookies()).some((cookie) => cookie.name === 'console_session')).toBe(false);

    await page.getByLabel('API key').fill(server.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/console\/api-keys$/);
    const session = (await context.cookies()).find((cookie) => cookie.name === 'console_session')!;
    expect(session.httpOnly).toBe(true);
    expect(session.sameSite).toBe('Strict');
    expect(session.secure).toBe(false); // plain http on loopback; Secure under https is checked in sessions.test.ts
    // Whole seconds, as the browser keeps them (the exact lifetime is checked in sessions.test.ts).
    expect(session.expires * 1000 - Date.now()).toBeLessThanOrEqual(12 * 3600 * 1000 + 2000);
    // Browser code as text: the tests' TypeScript has no DOM types.
    const stored = (await page.evaluate('({ cookie: document.cookie, local: JSON.stringify(localStorage), session: JSON.stringify(sessionStorage) })')) as {
      cookie: string;
    };
    expect(JSON.stringify(stored)).not.toContain(server.apiKey);
    expect(stored.cookie).not.toContain('console_session');
    await context.close();
  });

  // One case per width: axe-core on every page is most of this file's CPU, and one case for both
  // widths neared its 60 s on a loaded machine.
  for (const viewport of [
    { width: 1280, height: 900, suffix: 'desktop' },
    { width: 390, height: 844, suffix: 'phone' },
  ]) {
    it(`shows every page without a secret's value, and axe-core finds no serious or critical violation on any (${viewport.suffix})`, async () => {
      const { context, page } = await signedInPage({ bypassCSP: true, viewport: { width: viewport.width, height: viewport.height } });
      const others = [
        ['confirm', `/console/deployments/${deployment.id}/delete`],
        ['workspaces', '/console/workspaces'],
        ['not-found', '/console/deployments/no-such-deployment'],
      ] as const;
      for (const [name, path] of [...pagesToVisit(), ...others]) {
        await page.goto(path);
        const html = await page.content();
        expect(html, path).not.toContain(secretValue);
        expect(html, path).not.toContain(server.apiKey);
        expect(await axeViolations(page), `${path} at ${viewport.suffix} width`).toEqual([]);
        if (screenshots) await page.screenshot({ path: join(screenshots, `${name}-${viewport.suffix}.png`), fullPage: true });
      }
      await context.close();
    });
  }

  it('shows the sign-in page with no serious or critical axe-core violation', async () => {
    const signIn = await browser.newContext({ baseURL: server.url, bypassCSP: true });
    const page = await signIn.newPage();
    await page.goto('/console/sign-in');
    expect(await axeViolations(page)).toEqual([]);
    if (screenshots) await page.screenshot({ path: join(screenshots, 'sign-in-desktop.png') });
    await signIn.close();
  });

  it('shows a PATCH made through the API on an open page within 2 s, without a reload', async () => {
    const { context, page } = await signedInPage();
    await page.goto(`/console/deployments/${deployment.id}`);
    await page.evaluate('window.notReloaded = true');
    const rows = page.locator('#revisions-h + .table-wrap tbody tr');
    const before = await rows.count();
    const patched = await api.patch(`/v2/deployments/${deployment.id}`, { source_revision_config: { repo_ref: 'live-check' } });
    expect(patched.status).toBe(200);
    await expect.poll(() => rows.count(), { timeout: 2000, interval: 100 }).toBe(before + 1);
    await expect.poll(() => page.getByText('live-check').count(), { timeout: 2000, interval: 100 }).toBeGreaterThan(0);
    expect(await page.evaluate('window.notReloaded')).toBe(true);
    await revisionReaches(api, deployment.id, patched.body.latest_revision_id, ['DEPLOYED']);
    await context.close();
  });

  it('refuses a form whose CSRF token was taken out, and nothing happens', async () => {
    const { context, page } = await signedInPage();
    await page.goto(`/console/deployments/${deployment.id}/redeploy`);
    const before = (await api.get(`/v2/deployments/${deployment.id}/revisions`)).body.resources.length;
    await page.evaluate(`for (const input of document.querySelectorAll('main input[name="csrf"]')) input.remove()`);
    await page.getByRole('button', { name: 'Redeploy' }).click();
    expect(await page.getByRole('alert').textContent()).toContain('CSRF');
    expect((await api.get(`/v2/deployments/${deployment.id}/revisions`)).body.resources.length).toBe(before);
    await context.close();
  });

  it('rolls back from the page to an earlier DEPLOYED revision: a new revision with its configuration', async () => {
    const { context, page } = await signedInPage();
    await page.goto(`/console/deployments/${deployment.id}/revisions/${deployment.firstRevision}`);
    await page.getByRole('link', { name: 'Roll back to this' }).click();
    await page.getByRole('button', { name: 'Roll back' }).click();
    await page.waitForURL(/done=rollback/);
    expect(await page.getByRole('status').textContent()).toContain('Roll back started');
    const latest = (await api.get(`/v2/deployments/${deployment.id}`)).body.latest_revision_id;
    const revision = (await api.get(`/v2/deployments/${deployment.id}/revisions/${latest}`)).body;
    expect(revision.trigger).toBe('redeploy');
    expect(revision.source_revision_config.repo_ref).toBe('main');
    await revisionReaches(api, deployment.id, latest, ['DEPLOYED']);
    await context.close();
  });

  it('creates a key (shown once) and revokes it from the page', async () => {
    const { context, page } = await signedInPage();
    await page.goto('/console/api-keys');
    await page.getByLabel('Description').fill('made in the browser');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = await page.getByLabel('Key', { exact: true }).inputValue();
    expect((await apiClient(server.url, key).get('/v2/deployments')).status).toBe(200);
    await page.goto('/console/api-keys');
    expect(await page.content()).not.toContain(key);
    const row = page.getByRole('row').filter({ hasText: 'made in the browser' });
    await row.getByRole('link', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: 'Revoke' }).click();
    await page.waitForURL(/done=revoked/);
    expect(await page.getByRole('row').filter({ hasText: 'made in the browser' }).count()).toBe(0);
    expect((await apiClient(server.url, key).get('/v2/deployments')).status).toBe(401);
    await context.close();
  });

  it('signs out: the next page asks to sign in again', async () => {
    const { context, page } = await signedInPage();
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(/\/console\/sign-in$/);
    expect((await context.cookies()).some((cookie) => cookie.name === 'console_session')).toBe(false);
    await page.goto('/console');
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    await context.close();
  });

  it('works with JavaScript disabled: sign in, read every page, act through the confirmation page', async () => {
    const { context, page } = await signedInPage({ javaScriptEnabled: false });
    for (const [, path] of pagesToVisit()) {
      const answer = await page.goto(path);
      expect(answer?.status(), path).toBe(200);
      expect(await page.locator('h1').count(), path).toBe(1);
    }
    await page.goto(`/console/deployments/${deployment.id}`);
    expect(await page.getByText('OPENAI_API_KEY').count()).toBeGreaterThan(0);
    const before = (await api.get(`/v2/deployments/${deployment.id}/revisions?limit=100`)).body.resources.length;
    await page.getByRole('link', { name: 'Redeploy' }).click();
    await page.getByRole('button', { name: 'Redeploy' }).click();
    await page.waitForURL(/done=redeploy/);
    expect((await api.get(`/v2/deployments/${deployment.id}/revisions?limit=100`)).body.resources.length).toBe(before + 1);
    await context.close();
  });

  it('opens the hosted CLI link on the deployment page', async () => {
    const { context, page } = await signedInPage();
    await page.goto(`/o/${crypto.randomUUID()}/host/deployments/${deployment.id}`);
    expect(new URL(page.url()).pathname).toBe(`/console/deployments/${deployment.id}`);
    expect(await page.locator('h1').textContent()).toBe(deployment.name);
    await context.close();
  });
});
