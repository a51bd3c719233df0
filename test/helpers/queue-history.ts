import { expect } from 'vitest';
import type { Api } from './api.ts';

type Ended = { id: string; status: string; updated_at: string };

/**
 * What a deployment's queue must look like once a burst of PATCHes has settled (contract §5: one
 * revision in progress at a time, the newest queued one wins): the newest revision DEPLOYED and
 * live, every other one DEPLOYED or SKIPPED, and the revisions that ran (from their first deploy
 * log line to their end) never overlapping. `revisions` is the list, newest first, all ended.
 */
export async function expectQueueRanOneAtATime(api: Pick<Api, 'get'>, deploymentId: string, revisions: Ended[]): Promise<void> {
  const [newest, ...rest] = revisions;
  expect(newest!.status).toBe('DEPLOYED');
  for (const revision of rest) expect(['DEPLOYED', 'SKIPPED']).toContain(revision.status);
  const deployment = await api.get(`/v2/deployments/${deploymentId}`);
  expect(deployment.body).toMatchObject({ status: 'READY', latest_revision_id: newest!.id, active_revision_id: newest!.id });

  const ran: Array<{ id: string; from: number; to: number }> = [];
  for (const revision of revisions.filter((r) => r.status === 'DEPLOYED')) {
    const logs = await api.get<{ logs: Array<{ timestamp: string }> }>(`/v2/deployments/${deploymentId}/revisions/${revision.id}/logs?type=deploy&limit=50`);
    expect(logs.body.logs.length).toBeGreaterThan(0);
    ran.push({ id: revision.id, from: Date.parse(logs.body.logs[0]!.timestamp), to: Date.parse(revision.updated_at) });
  }
  ran.sort((a, b) => a.from - b.from);
  for (let i = 1; i < ran.length; i += 1) expect(ran[i]!.from, `${ran[i]!.id} started before ${ran[i - 1]!.id} ended`).toBeGreaterThanOrEqual(ran[i - 1]!.to);
}
