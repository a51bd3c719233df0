import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { revisionsOf } from './github.ts';
import { localRemote } from './local-remote.ts';
import { pushDeployment } from './shared-setup.ts';

/**
 * A real TCP listener on loopback that records every connection and never answers: it stands in
 * for an internal service a tenant would like the server to reach, and for a host that hangs.
 */
async function silentListener() {
  const sockets = new Set<Socket>();
  let accepted = 0;
  let closed = 0;
  const server = createServer((socket) => {
    accepted += 1;
    sockets.add(socket);
    socket.on('error', () => {});
    // Read (and drop) what the client sends, so its end of the connection is noticed.
    socket.resume();
    socket.on('close', () => {
      closed += 1;
      sockets.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    accepted: () => accepted,
    closed: () => closed,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('the reconciler contacts only what it should, as no one in particular', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const step of cleanup.reverse()) await step();
  });
  async function server(env: Record<string, string>): Promise<ServerProcess> {
    const started = await startServerProcess({ GITHUB_WEBHOOK_SECRET: 'hardening-secret', SANDBOX_STAGE_MS: '50', RECONCILE_INTERVAL_MS: '100', ...env });
    cleanup.push(() => started.kill('SIGKILL'));
    return started;
  }
  async function listener() {
    const l = await silentListener();
    cleanup.push(l.close);
    return l;
  }

  it('a host not in RECONCILE_ALLOWED_HOSTS is never contacted, in any URL form; an allowed one is', async () => {
    const target = await listener();
    const refusing = await server({});
    const api = apiClient(refusing.url, refusing.apiKey);
    const fx = await workspaceFixtures(api);
    const urls = [`https://127.0.0.1:${target.port}/acme/app.git`, `ssh://git@127.0.0.1:${target.port}/acme/app.git`, 'git@127.0.0.1:acme/app.git'];
    const deps = await Promise.all(urls.map((url) => pushDeployment(api, fx.integrationId, url)));
    for (const dep of deps) {
      await eventually(async () => (refusing.output().includes(`"msg":"reconciler: repository not contacted","deployment_id":"${dep.id}"`) ? true : undefined));
    }
    // Several more passes (100 ms apart) go by.
    await new Promise((r) => setTimeout(r, 500));
    expect(target.accepted()).toBe(0);
    expect(refusing.output()).toContain('is not in RECONCILE_ALLOWED_HOSTS');

    // The probe works: a server that allows this host and port does connect to it.
    const allowing = await server({ RECONCILE_ALLOWED_HOSTS: `github.com,127.0.0.1:${target.port}`, RECONCILE_TIMEOUT_MS: '500' });
    const other = apiClient(allowing.url, allowing.apiKey);
    await pushDeployment(other, (await workspaceFixtures(other)).integrationId, urls[0]!);
    await eventually(async () => (target.accepted() > 0 ? true : undefined));
  });

  it("git runs with an empty HOME: the server user's git config (insteadOf, credential helper) is never read", async () => {
    const real = localRemote();
    const trap = localRemote();
    const realHead = real.commit('The real repository');
    const trapHead = trap.commit('The trap: read only through the server user HOME');
    // The server user's HOME: its git config rewrites the real URL to the trap and runs a credential helper.
    const home = mkdtempSync(join(tmpdir(), 'cp-server-home-'));
    const config = `[url "${trap.url}"]\n\tinsteadOf = ${real.url}\n[credential]\n\thelper = "!touch ${home}/helper-ran; false"\n[protocol "file"]\n\tallow = always\n`;
    writeFileSync(join(home, '.gitconfig'), config);
    mkdirSync(join(home, '.config', 'git'), { recursive: true });
    writeFileSync(join(home, '.config', 'git', 'config'), config);
    // The trap works for a git that reads HOME.
    const trapped = execFileSync('git', ['ls-remote', real.url, 'refs/heads/main'], { env: { PATH: process.env.PATH, HOME: home }, encoding: 'utf8' });
    expect(trapped.split('\t')[0]).toBe(trapHead);

    const own = await server({ HOME: home, ALLOW_FILE_REPO_URLS: 'true', RECONCILE_INTERVAL_MS: '200' });
    const api = apiClient(own.url, own.apiKey);
    const dep = await pushDeployment(api, (await workspaceFixtures(api)).integrationId, real.url);
    await eventually(async () => (own.output().includes(`"deployment_id":"${dep.id}","branch":"main","head":"${realHead}"`) ? true : undefined));
    const second = real.commit('Second version');
    const revision = await eventually(async () => (await revisionsOf(api, dep.id)).find((r) => r.trigger === 'push'));
    expect(revision.source_revision_config.repo_commit_sha).toBe(second);
    expect(own.output()).not.toContain(trapHead);
  });

  it("one workspace's hanging URLs do not hold up another workspace's reads", async () => {
    const hanging = await listener();
    const remote = localRemote();
    const first = remote.commit('First version');
    const own = await server({
      ALLOW_FILE_REPO_URLS: 'true',
      RECONCILE_ALLOWED_HOSTS: `127.0.0.1:${hanging.port}`,
      RECONCILE_INTERVAL_MS: '200',
      // Long enough that no hanging read ends during the test.
      RECONCILE_TIMEOUT_MS: '120000',
    });
    const api = apiClient(own.url, own.apiKey);
    // The hostile workspace: ten deployments whose repositories accept a connection and never answer.
    const workspace = await api.post('/v1/workspaces', { name: uniqueName('hostile') });
    const hostile = apiClient(own.url, own.apiKey, { 'x-tenant-id': workspace.body.id });
    const hostileFx = await workspaceFixtures(hostile);
    for (let i = 0; i < 10; i++) await pushDeployment(hostile, hostileFx.integrationId, `https://127.0.0.1:${hanging.port}/hostile/repo-${i}.git`);
    await eventually(async () => (hanging.accepted() > 0 ? true : undefined));

    const dep = await pushDeployment(api, (await workspaceFixtures(api)).integrationId, remote.url);
    await eventually(async () => (own.output().includes(`"deployment_id":"${dep.id}","branch":"main","head":"${first}"`) ? true : undefined));
    const second = remote.commit('Second version');
    const revision = await eventually(async () => (await revisionsOf(api, dep.id)).find((r) => r.trigger === 'push'));
    expect(revision.source_revision_config.repo_commit_sha).toBe(second);

    // All that while, every hostile read was still hanging, and the hostile workspace held no more
    // than its share (a quarter of RECONCILE_CONCURRENCY=8) of the reads.
    expect(hanging.closed()).toBe(0);
    expect(hanging.accepted()).toBeGreaterThan(0);
    expect(hanging.accepted()).toBeLessThanOrEqual(2);
  });

  it('a read that passes RECONCILE_TIMEOUT_MS is stopped, its git helper and connection included', async () => {
    const hanging = await listener();
    const own = await server({ RECONCILE_ALLOWED_HOSTS: `127.0.0.1:${hanging.port}`, RECONCILE_TIMEOUT_MS: '300', RECONCILE_INTERVAL_MS: '200' });
    const api = apiClient(own.url, own.apiKey);
    await pushDeployment(api, (await workspaceFixtures(api)).integrationId, `https://127.0.0.1:${hanging.port}/slow/repo.git`);
    await eventually(async () => (own.output().includes('git ls-remote failed: timed out after 300 ms') ? true : undefined));
    // The listener never closes a connection: only killing git's https helper closes it.
    await eventually(async () => (hanging.closed() > 0 ? true : undefined));
  });
});
