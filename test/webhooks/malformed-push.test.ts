import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, processedDelivery, pushPayload, revisionsOf, sha, workspaceHook } from './github.ts';
import { pushDeployment } from './shared-setup.ts';

const APP_SECRET = 'malformed-test-app-secret';

/** Event names and push payloads as the hosted API's trial found GitHub sends them, malformed ones included. */
describe('event names and pushes that cannot be built from', () => {
  let server: ServerProcess;
  let api: Api;
  let fx: Awaited<ReturnType<typeof workspaceFixtures>>;
  let hook: Awaited<ReturnType<typeof workspaceHook>>;
  let counter = 0;

  beforeAll(async () => {
    server = await startServerProcess({ GITHUB_WEBHOOK_SECRET: APP_SECRET, SANDBOX_STAGE_MS: '50', RECONCILE_INTERVAL_MS: '0' });
    api = apiClient(server.url, server.apiKey);
    fx = await workspaceFixtures(api);
    hook = await workspaceHook(api);
  });
  afterAll(async () => {
    await server?.kill('SIGKILL');
  });

  async function deployed() {
    counter += 1;
    const repo = `acme/malformed-${Date.now().toString(36)}-${counter}`;
    const dep = await pushDeployment(api, fx.integrationId, `https://github.com/${repo}`);
    return { repo, dep };
  }
  const pushRevisions = async (id: string) => (await revisionsOf(api, id)).filter((r) => r.trigger === 'push');

  it.each(['projects_v2_item', 'projects_v2', 'sub_issues', 'merge_group'])('X-GitHub-Event %s is accepted, recorded and ignored', async (event) => {
    const delivery = await deliver(server.url, event, { action: 'edited', installation: { id: fx.installationId } }, { secret: APP_SECRET });
    expect(delivery.status).toBe(202);
    const entry = await processedDelivery(api, delivery.id);
    expect(entry).toMatchObject({ event, outcome: 'ignored' });
  });

  it('event names that are not GitHub-shaped are still refused (400)', async () => {
    for (const event of ['Push', 'push-event', 'push event', 'x'.repeat(101)]) {
      expect((await deliver(server.url, event, { zen: 'x' }, { secret: APP_SECRET })).status, event).toBe(400);
    }
  });

  it.each([
    ['a branch name', 'main'],
    ['a short SHA', 'abc1234'],
    ['an upper-case SHA', sha().toUpperCase()],
    ['a SHA with a suffix', `${sha()}; rm -rf /`],
  ])('a push whose after is %s is recorded as not buildable, with the reason, and builds nothing', async (_label, after) => {
    const { repo, dep } = await deployed();
    const payload = { ...pushPayload({ repo, installationId: null }), after };
    const delivery = await deliver(server.url, 'push', payload, { secret: hook.secret, path: hook.path });
    expect(delivery.status).toBe(202);
    const entry = await processedDelivery(api, delivery.id);
    expect(entry.outcome).toBe('no_revision');
    expect(entry.reason).toMatch(/Not buildable: after .* is not a 40-character hexadecimal commit SHA/);
    expect(entry.results).toEqual([]);
    expect(await pushRevisions(dep.id)).toEqual([]);
  });

  it('a push whose installation.id is not a number is not buildable, not treated as naming no installation', async () => {
    const { repo, dep } = await deployed();
    // A number in a string still names the installation: its workspace sees why nothing was built.
    const quoted = { ...pushPayload({ repo, installationId: null }), installation: { id: String(fx.installationId) } };
    const delivery = await deliver(server.url, 'push', quoted, { secret: APP_SECRET });
    expect(delivery.status).toBe(202);
    const entry = await processedDelivery(api, delivery.id);
    expect(entry.outcome).toBe('no_revision');
    expect(entry.reason).toMatch(/Not buildable: installation.id ".*" is not a number/);
    expect(entry.installation_id).toBe(fx.installationId);

    // Through the workspace's own repository webhook too.
    const viaHook = await deliver(
      server.url,
      'push',
      { ...pushPayload({ repo, installationId: null }), installation: { id: { $gt: 0 } } },
      { secret: hook.secret, path: hook.path },
    );
    const hookEntry = await processedDelivery(api, viaHook.id);
    expect(hookEntry.reason).toMatch(/Not buildable: installation.id \{"\$gt":0\} is not a number/);

    // Anything else addresses no one, and builds nothing for anyone.
    const garbage = await deliver(server.url, 'push', { ...pushPayload({ repo, installationId: null }), installation: { id: 'acme' } }, { secret: APP_SECRET });
    expect(garbage.status).toBe(202);
    await eventually(async () => (server.output().includes(`"msg":"webhooks: delivery processed","delivery_id":"${garbage.id}"`) ? true : undefined));
    expect(await pushRevisions(dep.id)).toEqual([]);
  });
});
