import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../../server/crypto/api-key.ts';
import { type Api, apiClient, eventually } from '../helpers/api.ts';
import { workspaceFixtures } from '../helpers/fixtures.ts';
import { openRawSql } from '../helpers/raw-sql.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, processedDelivery, pushPayload, revisionsOf, workspaceHook } from './github.ts';
import { pushDeployment } from './shared-setup.ts';

const APP_SECRET = 'the-github-app-secret';

/**
 * There is no API for organizations: add one, its default workspace (with the sandbox listener
 * every workspace gets) and an organization key to
 * the server's database file directly (the server looks keys up in the database on a miss).
 */
async function addOrganization(databaseUrl: string): Promise<{ key: string; workspaceId: string }> {
  const db = openRawSql(databaseUrl);
  try {
    const key = `attacker-${crypto.randomUUID()}`;
    const now = new Date().toISOString();
    const orgId = crypto.randomUUID();
    const workspaceId = crypto.randomUUID();
    await db.prepare('INSERT INTO organizations (id, name, created_at) VALUES (?, ?, ?)').run(orgId, `attacker-${orgId}`, now);
    await db
      .prepare('INSERT INTO workspaces (id, organization_id, name, is_default, created_at) VALUES (?, ?, ?, 1, ?)')
      .run(workspaceId, orgId, 'default', now);
    await db
      .prepare(
        `INSERT INTO listeners (id, tenant_id, compute_type, compute_id, compute_config, created_at, updated_at) VALUES (?, ?, 'sandbox', 'sandbox', '{"k8s_namespaces":[]}', ?, ?)`,
      )
      .run(crypto.randomUUID(), workspaceId, now, now);
    await db
      .prepare('INSERT INTO api_keys (id, organization_id, workspace_id, key_hash, description, created_at) VALUES (?, ?, NULL, ?, ?, ?)')
      .run(crypto.randomUUID(), orgId, hashApiKey(key), 'another organization', now);
    return { key, workspaceId };
  } finally {
    await db.close();
  }
}

/**
 * Another organization creates a `github` deployment naming the victim's repository: it must not
 * see the deliveries for that repository in its log, and the victim's repository webhook must not
 * build its deployment.
 */
describe('a delivery reaches only the workspaces it is addressed to', () => {
  let server: ServerProcess;
  let victim: Api;
  let attacker: Api;
  let victimFx: Awaited<ReturnType<typeof workspaceFixtures>>;
  let attackerFx: Awaited<ReturnType<typeof workspaceFixtures>>;
  let counter = 0;

  beforeAll(async () => {
    server = await startServerProcess({ GITHUB_WEBHOOK_SECRET: APP_SECRET, SANDBOX_STAGE_MS: '50', RECONCILE_INTERVAL_MS: '0' });
    victim = apiClient(server.url, server.apiKey);
    victimFx = await workspaceFixtures(victim);
    attacker = apiClient(server.url, (await addOrganization(server.databaseUrl)).key);
    // The attacker cannot link the victim's installation (409), so it links one of its own.
    attackerFx = await workspaceFixtures(attacker);
  });
  afterAll(async () => {
    await server?.kill('SIGKILL');
  });

  /** The victim's repository, a deployment of it in each organization. */
  async function contested() {
    counter += 1;
    const repo = `victim/agent-${Date.now().toString(36)}-${counter}`;
    const url = `https://github.com/${repo}`;
    const mine = await pushDeployment(victim, victimFx.integrationId, url);
    const theirs = await pushDeployment(attacker, attackerFx.integrationId, url);
    return { repo, mine, theirs };
  }

  const pushes = async (api: Api, deploymentId: string) => (await revisionsOf(api, deploymentId)).filter((r) => r.trigger === 'push');
  const inLog = async (api: Api, deliveryId: string) => {
    const byId = await api.get(`/v1/webhooks/github/deliveries?delivery_id=${deliveryId}`);
    const all = await api.get('/v1/webhooks/github/deliveries?limit=100');
    expect(byId.status).toBe(200);
    return [...byId.body.resources, ...all.body.resources].some((d: { delivery_id: string }) => d.delivery_id === deliveryId);
  };
  /** Waits for the server to finish a delivery no test workspace may see (from the server's own log). */
  const processedInServerLog = (deliveryId: string) =>
    eventually(async () => (server.output().includes(`"msg":"webhooks: delivery processed","delivery_id":"${deliveryId}"`) ? true : undefined));

  it("an App delivery naming the victim's installation builds only the victim's deployment, and the attacker's log never shows it", async () => {
    const { repo, mine, theirs } = await contested();
    const delivery = await deliver(server.url, 'push', pushPayload({ repo, installationId: victimFx.installationId }), { secret: APP_SECRET });
    expect(delivery.status).toBe(202);
    const entry = await processedDelivery(victim, delivery.id);
    expect(entry.outcome).toBe('revisions_created');
    expect(entry.results.map((r: { deployment_id: string }) => r.deployment_id)).toEqual([mine.id]);

    expect(await pushes(victim, mine.id)).toHaveLength(1);
    expect(await pushes(attacker, theirs.id)).toEqual([]);
    expect(await inLog(attacker, delivery.id)).toBe(false);
  });

  it("a repository webhook signed with the victim's workspace secret builds only in the victim's workspace", async () => {
    const { repo, mine, theirs } = await contested();
    const hook = await workspaceHook(victim);
    const delivery = await deliver(server.url, 'push', pushPayload({ repo, installationId: null }), { secret: hook.secret, path: hook.path });
    expect(delivery.status).toBe(202);
    const entry = await processedDelivery(victim, delivery.id);
    expect(entry.outcome).toBe('revisions_created');
    expect(entry.results.map((r: { deployment_id: string }) => r.deployment_id)).toEqual([mine.id]);
    expect(await pushes(victim, mine.id)).toHaveLength(1);
    expect(await pushes(attacker, theirs.id)).toEqual([]);
    expect(await inLog(attacker, delivery.id)).toBe(false);
  });

  it("one signed with the attacker's own secret builds only the attacker's deployment; the victim sees nothing", async () => {
    const { repo, mine, theirs } = await contested();
    const hook = await workspaceHook(attacker);
    const delivery = await deliver(server.url, 'push', pushPayload({ repo, installationId: null }), { secret: hook.secret, path: hook.path });
    expect(delivery.status).toBe(202);
    const entry = await processedDelivery(attacker, delivery.id);
    expect(entry.results.map((r: { deployment_id: string }) => r.deployment_id)).toEqual([theirs.id]);
    expect(await pushes(attacker, theirs.id)).toHaveLength(1);
    expect(await pushes(victim, mine.id)).toEqual([]);
    expect(await inLog(victim, delivery.id)).toBe(false);
  });

  it("a workspace's secret is good only at its own URL: the victim's secret at the attacker's URL and the reverse → 401", async () => {
    const { repo } = await contested();
    const victimHook = await workspaceHook(victim);
    const attackerHook = await workspaceHook(attacker);
    const payload = pushPayload({ repo, installationId: null });
    expect((await deliver(server.url, 'push', payload, { secret: victimHook.secret, path: attackerHook.path })).status).toBe(401);
    expect((await deliver(server.url, 'push', payload, { secret: attackerHook.secret, path: victimHook.path })).status).toBe(401);
    // The App's secret is not a workspace's secret either.
    expect((await deliver(server.url, 'push', payload, { secret: APP_SECRET, path: victimHook.path })).status).toBe(401);
    // A workspace that has no secret, or does not exist, is refused the same way.
    const unknown = `/v1/webhooks/github/workspaces/${crypto.randomUUID()}`;
    expect((await deliver(server.url, 'push', payload, { secret: victimHook.secret, path: unknown })).status).toBe(401);
  });

  it("the App's secret with no installation is recorded as addressed to no one: built for no workspace, in no workspace's log", async () => {
    const { repo, mine, theirs } = await contested();
    const delivery = await deliver(server.url, 'push', pushPayload({ repo, installationId: null }), { secret: APP_SECRET });
    expect(delivery.status).toBe(202);
    await processedInServerLog(delivery.id);
    expect(server.output()).toMatch(new RegExp(`"delivery_id":"${delivery.id}","event":"push","workspace_id":null,"outcome":"ignored"`));
    expect(await pushes(victim, mine.id)).toEqual([]);
    expect(await pushes(attacker, theirs.id)).toEqual([]);
    expect(await inLog(victim, delivery.id)).toBe(false);
    expect(await inLog(attacker, delivery.id)).toBe(false);
  });

  it("a workspace that sends a delivery id first cannot make the victim's delivery with that id count as a redelivery", async () => {
    const { repo, mine, theirs } = await contested();
    const hook = await workspaceHook(attacker);
    const id = crypto.randomUUID();
    const early = await deliver(server.url, 'push', pushPayload({ repo, installationId: null, message: 'claimed first' }), {
      secret: hook.secret,
      path: hook.path,
      id,
    });
    expect(early.status).toBe(202);
    expect((await processedDelivery(attacker, id)).results.map((r: { deployment_id: string }) => r.deployment_id)).toEqual([theirs.id]);

    const real = await deliver(server.url, 'push', pushPayload({ repo, installationId: victimFx.installationId }), { secret: APP_SECRET, id });
    expect(real.status).toBe(202);
    const entry = await processedDelivery(victim, id);
    expect(entry).toMatchObject({ delivery_id: id, outcome: 'revisions_created' });
    expect(await pushes(victim, mine.id)).toHaveLength(1);
    // Each sees its own delivery under GitHub's id, and only its own.
    const attackers = (await attacker.get(`/v1/webhooks/github/deliveries?delivery_id=${id}`)).body.resources;
    expect(attackers).toHaveLength(1);
    expect(attackers[0].results.map((r: { deployment_id: string }) => r.deployment_id)).toEqual([theirs.id]);
  });

  it("an installation event sent through a workspace's repository webhook changes no integration", async () => {
    const hook = await workspaceHook(attacker);
    const event = { action: 'deleted', installation: { id: victimFx.installationId, account: { login: 'victim' } }, sender: { login: 'mallory' } };
    const delivery = await deliver(server.url, 'installation', event, { secret: hook.secret, path: hook.path });
    expect(delivery.status).toBe(202);
    const entry = await processedDelivery(attacker, delivery.id);
    expect(entry).toMatchObject({ outcome: 'ignored', results: [] });
    expect(entry.reason).toMatch(/only from the GitHub App/);
    const integrations = await victim.get('/v1/integrations/github/install');
    expect(integrations.body.map((i: { id: string }) => i.id)).toContain(victimFx.integrationId);
  });
});
