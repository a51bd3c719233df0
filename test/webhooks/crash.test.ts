import { afterAll, describe, expect, it } from 'vitest';
import { apiClient } from '../helpers/api.ts';
import { revisionReaches, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';
import { deliver, processedDelivery, pushPayload, revisionsOf } from './github.ts';
import { pushDeployment } from './shared-setup.ts';

const SECRET = 'crash-test-secret';

describe('a delivery acknowledged with 202 survives SIGKILL before it is processed', () => {
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    for (const s of servers) await s.kill('SIGKILL');
  });

  it('the revision appears after the restart', async () => {
    // WEBHOOK_PROCESS_DELAY_MS holds processing back, so the kill lands between the 202 and the work.
    // A short lease: on PostgreSQL the restarted server takes the killed one's claimed delivery over
    // only once its lease has passed (15 s by default; SQLite frees it at the start).
    const first = await startServerProcess({
      GITHUB_WEBHOOK_SECRET: SECRET,
      WEBHOOK_PROCESS_DELAY_MS: '600000',
      RECONCILE_INTERVAL_MS: '0',
      SANDBOX_STAGE_MS: '50',
      PIPELINE_LEASE_MS: '2000',
    });
    servers.push(first);
    const api = apiClient(first.url, first.apiKey);
    const fx = await workspaceFixtures(api);
    const dep = await pushDeployment(api, fx.integrationId, 'https://github.com/acme/crash-safe');
    const payload = pushPayload({ repo: 'acme/crash-safe', installationId: fx.installationId });

    const delivery = await deliver(first.url, 'push', payload, { secret: SECRET });
    expect(delivery.status).toBe(202);
    const pending = await api.get(`/v1/webhooks/github/deliveries?delivery_id=${delivery.id}`);
    expect(pending.body.resources).toEqual([expect.objectContaining({ delivery_id: delivery.id, outcome: 'pending', processed_at: null })]);
    expect((await revisionsOf(api, dep.id)).filter((r) => r.trigger === 'push')).toEqual([]);

    await first.kill('SIGKILL');
    const second = await first.restart({ WEBHOOK_PROCESS_DELAY_MS: '0' });
    servers.push(second);
    const after = apiClient(second.url, second.apiKey);

    const entry = await processedDelivery(after, delivery.id);
    expect(entry.outcome).toBe('revisions_created');
    const pushes = (await revisionsOf(after, dep.id)).filter((r) => r.trigger === 'push');
    expect(pushes).toHaveLength(1);
    expect(pushes[0].source_revision_config.repo_commit_sha).toBe(payload.after);
    expect((await revisionReaches(after, dep.id, pushes[0].id, ['DEPLOYED'])).status).toBe('DEPLOYED');

    // GitHub redelivering it now (same delivery id) changes nothing.
    const redelivered = await deliver(second.url, 'push', payload, { secret: SECRET, id: delivery.id });
    expect(redelivered.status).toBe(202);
    expect((await revisionsOf(after, dep.id)).filter((r) => r.trigger === 'push')).toHaveLength(1);
  });
});
