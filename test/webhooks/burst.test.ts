import { afterAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api.ts';
import { revisionReaches, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
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
    // Stages long enough that the create revision is still running while the three pushes land.
    server = await startServerProcess({ GITHUB_WEBHOOK_SECRET: SECRET, RECONCILE_INTERVAL_MS: '0', SANDBOX_STAGE_MS: '1000' });
    const api = apiClient(server.url, server.apiKey);
    const fx = await workspaceFixtures(api);
    const dep = await pushDeployment(api, fx.integrationId, 'https://github.com/acme/bursty');

    const payloads = [1, 2, 3].map((n) => pushPayload({ repo: 'acme/bursty', installationId: fx.installationId, message: `Commit ${n}` }));
    const revisionIds: string[] = [];
    for (const payload of payloads) {
      const delivery = await deliver(server.url, 'push', payload, { secret: SECRET });
      expect(delivery.status).toBe(202);
      const entry = await processedDelivery(api, delivery.id);
      expect(entry.outcome).toBe('revisions_created');
      revisionIds.push(entry.results[0].revision_id);
    }
    const running = await api.get(`/v2/deployments/${dep.id}/revisions/${dep.latest_revision_id}`);
    expect(TERMINAL, 'precondition: the first revision is still running while the pushes arrive').not.toContain(running.body.status);

    const [first, second, newest] = revisionIds as [string, string, string];
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
