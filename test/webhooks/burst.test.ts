import { afterAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api.ts';
import { revisionReaches, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { testAgent } from '../helpers/test-agent.ts';
import { deliver, processedDelivery, pushPayload } from './github.ts';
import { pushDeployment } from './shared-setup.ts';

const SECRET = 'burst-test-secret';
const TERMINAL = ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED', 'CREATE_FAILED', 'SKIPPED', 'INTERRUPTED'];

describe('a burst of pushes', () => {
  let server: ServerProcess | undefined;
  afterAll(async () => {
    await server?.kill('SIGKILL');
  });

  it('three pushes in a second build only the newest once the running revision ends; the others say why', async () => {
    server = await startServerProcess({ GITHUB_WEBHOOK_SECRET: SECRET, RECONCILE_INTERVAL_MS: '0' });
    const api = apiClient(server.url, server.apiKey);
    const fx = await workspaceFixtures(api);
    // The workspace's revisions go to a local listener whose agent is this test: it holds the create's
    // revision BUILDING while the three pushes land (with the sandbox's 1 s stages, that revision had
    // ended before the third push was processed at load 26).
    const agent = await testAgent(server.url, api);
    const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
    expect((await api.patch(`/v1/workspaces/${workspaceId}`, { default_listener_id: agent.listenerId })).status).toBe(200);
    const dep = await pushDeployment(api, fx.integrationId, 'https://github.com/acme/bursty');
    const running = await agent.claim(10);
    expect(running?.revision?.id).toBe(dep.latest_revision_id);

    const payloads = [1, 2, 3].map((n) => pushPayload({ repo: 'acme/bursty', installationId: fx.installationId, message: `Commit ${n}` }));
    const revisionIds: string[] = [];
    for (const payload of payloads) {
      const delivery = await deliver(server.url, 'push', payload, { secret: SECRET });
      expect(delivery.status).toBe(202);
      const entry = await processedDelivery(api, delivery.id);
      expect(entry.outcome).toBe('revisions_created');
      revisionIds.push(entry.results[0].revision_id);
    }
    const held = await api.get(`/v2/deployments/${dep.id}/revisions/${dep.latest_revision_id}`);
    expect(TERMINAL, 'precondition: the first revision is still running while the pushes arrive').not.toContain(held.body.status);

    // The running revision ends; the next offered is the newest push's, and it alone.
    await agent.transition(running!, 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING', 'DEPLOYED');
    const [first, second, newest] = revisionIds as [string, string, string];
    const next = await agent.claim(10);
    expect(next?.revision?.id).toBe(newest);
    await agent.transition(next!, 'BUILDING', 'AWAITING_DEPLOY', 'DEPLOYING', 'DEPLOYED');
    expect(await agent.claim(0)).toBeNull();
    const built = await revisionReaches(api, dep.id, newest, ['DEPLOYED']);
    expect(built.source_revision_config.repo_commit_sha).toBe(payloads[2]!.after);
    for (const older of [first, second]) {
      const skipped = await revisionReaches(api, dep.id, older, TERMINAL);
      expect(skipped.status).toBe('SKIPPED');
      expect(skipped.status_message).toContain(newest);
      expect(skipped.status_message).toContain(payloads[2]!.after.slice(0, 12));
      expect(skipped.status_message).toMatch(/push of commit .* only the newest queued revision is built/);
    }
    expect((await api.get(`/v2/deployments/${dep.id}/revisions/${dep.latest_revision_id}`)).body.status).toBe('DEPLOYED');
    expect((await api.get(`/v2/deployments/${dep.id}`)).body.active_revision_id).toBe(newest);
  });
});
