import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Cluster, startCluster } from '../helpers/cluster.ts';
import { githubBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';

/** Each simulated stage lasts this long: nothing but the change made through another process can end the wait early. */
const STAGE_MS = 8000;
/** How long the held request asks to wait (below the stage time, so no stage change of the sandbox can answer it). */
const WAIT_SECONDS = 5;

describe('a long-poll held on one process is answered by a change made through another (contract §10)', () => {
  let cluster: Cluster;

  beforeAll(async () => {
    cluster = await startCluster({ SANDBOX_STAGE_MS: String(STAGE_MS), RECONCILE_INTERVAL_MS: '0' });
  });
  afterAll(async () => {
    await cluster?.stopAll();
  });

  it('answers within a fraction of a second of an interrupt through process 2', async () => {
    const fx = await workspaceFixtures(cluster.api(2));
    // Created through process 3, held on process 1, changed through process 2: three different processes.
    const created = await cluster.api(2).post('/v2/deployments', githubBody(uniqueName('lp'), fx.integrationId));
    expect(created.status).toBe(201);
    const path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    // Wait for the stage that holds still for STAGE_MS, so the ETag taken next is not outdated by a
    // step of the pipeline (which would answer the held request at once, for the wrong reason).
    await revisionReaches(cluster.api(0), created.body.id, created.body.latest_revision_id, ['BUILDING'], 3 * STAGE_MS);
    const first = await fetch(cluster.processes[0]!.url + path, { headers: { 'x-api-key': cluster.apiKey } });
    expect(first.status).toBe(200);
    const etag = first.headers.get('etag')!;
    expect(etag).toBeTruthy();
    const before = (await first.json()) as { status: string };
    expect(before.status).toBe('BUILDING');

    const started = performance.now();
    const held = fetch(cluster.processes[0]!.url + path, {
      headers: { 'x-api-key': cluster.apiKey, 'if-none-match': etag, prefer: `wait=${WAIT_SECONDS}` },
    });
    // Give the request time to be held (it must be waiting, not answered from the read before the change).
    await new Promise((r) => setTimeout(r, 300));
    const changedAt = performance.now();
    const interrupted = await cluster.api(1).post(`${path}/interrupt`);
    expect(interrupted.status).toBe(200);
    expect(interrupted.body.status).toBe('INTERRUPTED');

    const answer = await held;
    const afterChangeMs = performance.now() - changedAt;
    const body = answer.status === 200 ? ((await answer.json()) as { status: string }) : null;
    // The answer is the change itself, not the end of the wait: 200 with the new state and a new ETag ...
    expect({ status: answer.status, revision: body?.status }).toEqual({ status: 200, revision: 'INTERRUPTED' });
    expect(answer.headers.get('etag')).not.toBe(etag);
    // ... within a fraction of a second of it (generous: the wait was 5 s and the stage 8 s). Only a
    // wake-up across processes makes this; a re-read when the wait ends would answer after 5 s.
    expect(afterChangeMs).toBeLessThan(1500);
    expect(performance.now() - started).toBeLessThan(WAIT_SECONDS * 1000);
  });
});
