import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RevisionWait } from '../../server/domain/revision-wait.ts';
import { revisionEtag } from '../../server/domain/revisions.ts';
import { revisionFastPath } from '../../server/http/revision-fast-lane.ts';
import { RevisionWatch } from '../../server/lib/revision-watch.ts';
import type { Services } from '../../server/services.ts';
import { toRevision } from '../../server/store/rows.ts';

// The GET revision lane's held requests woken by one change, on a real loopback server: every
// waiter is answered before any is counted (the counts, like the rest of the bookkeeping, come
// after the last answer), and each is counted once. The store is a stand-in holding one record.

const DEPLOYMENT = '11111111-1111-4111-8111-111111111111';
const REVISION = '22222222-2222-4222-8222-222222222222';
const WAITERS = 5;

const record = (version: number, status: string) =>
  toRevision({
    id: REVISION,
    deployment_id: DEPLOYMENT,
    tenant_id: 'w',
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: `2026-01-01T00:00:0${version}.000Z`,
    status,
    status_message: null,
    source: 'github',
    source_revision_config: JSON.stringify({ repo_ref: 'main', graph_config_path: 'langgraph.json' }),
    secrets: 'v1:sealed',
    trigger: 'push',
    version,
  });

let server: Server | undefined;
afterEach(() => server?.close());

/**
 * A loopback server with the lane in front: its store answers `current` (a client holding another
 * version is answered at once, as Revisions.hold does; one holding it waits on a real watch and reads
 * it again when its wait runs out), its
 * metrics and each answer written (`end`) are noted in `events`, in order.
 */
async function laneServer(current: ReturnType<typeof record>) {
  const events: string[] = [];
  const watch = new RevisionWatch();
  const services = {
    auth: { cachedPrincipal: () => ({ keyId: 'k', organizationId: 'o', workspaceId: 'w', organizationScoped: false }) },
    revisions: {
      hold: (wait: RevisionWait, waitMs: number) => {
        if (!wait.isKnown(revisionEtag(current))) return wait.answer(current);
        // A wait ended without the changed record (its deadline) reads the revision again.
        wait.revisions = { reread: () => Promise.resolve(current) } as unknown as RevisionWait['revisions'];
        watch.hold(wait, waitMs);
      },
    },
    metrics: { httpAnswered: (method: string, _route: string, status: number) => events.push(`counted ${method} ${status}`) },
  } as unknown as Pick<Services, 'auth' | 'revisions' | 'metrics'>;
  server = createServer();
  // Each answer noted as it is written (its `end`): this listener runs before the lane's.
  server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
    const end = res.end.bind(res) as (body?: string) => ServerResponse;
    res.end = ((body?: string) => {
      events.push(`answered ${res.statusCode}`);
      return end(body);
    }) as ServerResponse['end'];
  });
  server.on(
    'request',
    revisionFastPath(services, (_req, res) => res.writeHead(500).end()),
  );
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { events, watch, port: (server.address() as AddressInfo).port };
}

describe('the GET revision lane woken by a change', () => {
  it('answers every held request before it counts any, and counts each once', async () => {
    const current = record(1, 'BUILDING');
    const { events, watch, port } = await laneServer(current);
    const answers = Array.from({ length: WAITERS }, () => longPoll(port, revisionEtag(current)));
    while (watch.size < WAITERS) await new Promise((resolve) => setTimeout(resolve, 5));
    const changed = record(2, 'INTERRUPTED');
    watch.notify(REVISION, changed);
    expect(events).toEqual([...Array(WAITERS).fill('answered 200'), ...Array(WAITERS).fill('counted GET 200')]);
    for (const answer of await Promise.all(answers)) {
      expect(answer.status).toBe(200);
      expect(answer.etag).toBe(revisionEtag(changed));
      expect(JSON.parse(answer.body)).toMatchObject({ id: REVISION, status: 'INTERRUPTED' });
    }
    expect(watch.size).toBe(0);
    expect(events).toHaveLength(2 * WAITERS);
  });

  it('counts at once, once each, a request answered without waiting and one whose wait ran out', async () => {
    const current = record(1, 'BUILDING');
    const { events, watch, port } = await laneServer(current);
    // A client holding another version: 200 at once, never held.
    const stale = await longPoll(port, '"another"');
    expect(stale.status).toBe(200);
    expect(events).toEqual(['answered 200', 'counted GET 200']);
    // A client holding the current version, waiting one second: 304 when the wait runs out.
    const unchanged = await longPoll(port, revisionEtag(current), 'wait=1');
    expect(unchanged.status).toBe(304);
    expect(events).toEqual(['answered 200', 'counted GET 200', 'answered 304', 'counted GET 304']);
    expect(watch.size).toBe(0);
  });
});

function longPoll(port: number, etag: string, prefer = 'wait=5'): Promise<{ status: number; etag: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: `/v2/deployments/${DEPLOYMENT}/revisions/${REVISION}`,
        headers: { 'x-api-key': 'key', 'if-none-match': etag, prefer },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, etag: String(res.headers.etag), body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}
