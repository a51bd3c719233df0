import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Api, apiClient } from '../helpers/api.ts';
import { githubBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

describe('conditional long-poll on a revision', () => {
  let server: ServerProcess;
  let api: Api;

  beforeAll(async () => {
    server = await startServerProcess({ SANDBOX_STAGE_MS: '1000' });
    api = apiClient(server.url, server.apiKey);
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('answers 304 when nothing changed, and returns within a fraction of a second of a change', async () => {
    const fx = await workspaceFixtures(api);
    const created = await api.post('/v2/deployments', githubBody(uniqueName('poll'), fx.integrationId));
    const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;

    const plain = await api.get(path);
    const etag = plain.headers.get('etag')!;
    expect(etag).toMatch(/^".+"$/);
    // An ordinary conditional GET without Prefer: 304 at once.
    const conditional = await api.get(path, { 'if-none-match': etag });
    expect(conditional.status).toBe(304);

    // A short wait that nothing interrupts: 304 after about the time asked.
    // Then hold until the status changes: the sandbox moves on every second.
    let current = etag;
    let status = plain.body.status as string;
    const lags: number[] = [];
    while (status !== 'DEPLOYED') {
      const held = await api.get(path, { 'if-none-match': current, prefer: 'wait=30' });
      const answeredAt = Date.now();
      if (held.status === 304) continue;
      expect(held.status).toBe(200);
      expect(held.headers.get('etag')).not.toBe(current);
      current = held.headers.get('etag')!;
      status = held.body.status;
      lags.push(answeredAt - Date.parse(held.body.updated_at));
    }
    expect(lags.length).toBeGreaterThan(1);
    // Each answer came well within a second of the revision's change (the clocks are the same machine's).
    for (const lag of lags) expect(lag).toBeLessThan(900);

    const expired = Date.now();
    const timedOut = await api.get(path, { 'if-none-match': current, prefer: 'wait=1' });
    expect(timedOut.status).toBe(304);
    expect(Date.now() - expired).toBeGreaterThanOrEqual(900);
  });
});
