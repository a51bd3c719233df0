import { expect } from 'vitest';
import type { Api } from './api.ts';
import { uniqueName } from './fixtures.ts';

type Work = {
  kind: 'revision' | 'teardown';
  claim_id: string;
  deployment: { id: string };
  revision?: { id: string; status: string };
};

/**
 * A local listener whose agent is the test: its revisions and teardowns wait for the test's claims
 * and reports, where the sandbox's stages last a span of wall time. A test that needs a revision
 * still running, or a deployment still being deleted, at some later step holds it so, however
 * slowly a loaded machine lets the test get there.
 */
export async function testAgent(url: string, api: Api) {
  const listener = await api.post('/v2/listeners', { compute_type: 'local', compute_id: uniqueName('test-agent') });
  expect(listener.status).toBe(201);
  const listenerId = listener.body.id as string;
  const token = (await api.post(`/v2/listeners/${listenerId}/tokens`)).body.token as string;
  const call = (path: string, body: unknown) =>
    fetch(`${url}/v2/listeners/${listenerId}/agent${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  return {
    listenerId,
    /** The next work offered (null when none came within `waitSeconds`). */
    async claim(waitSeconds: number): Promise<Work | null> {
      const answer = await call('/claim', { agent_id: 'test-agent', wait_seconds: waitSeconds });
      expect(answer.status).toBe(200);
      return ((await answer.json()) as { work: Work | null }).work;
    },
    /** Moves a claimed revision through `statuses`, from the status it was claimed in. */
    async transition(work: Work, ...statuses: string[]): Promise<void> {
      let from = work.revision!.status;
      for (const to of statuses) {
        const answer = await call(`/claims/${work.claim_id}/transition`, { from, to });
        expect(answer.status, `${from} → ${to}: ${await answer.text()}`).toBeLessThan(300);
        from = to;
      }
    },
    /** Reports a claimed teardown finished. */
    async teardownDone(work: Work): Promise<void> {
      expect((await call(`/claims/${work.claim_id}/done`, {})).status).toBe(204);
    },
  };
}
