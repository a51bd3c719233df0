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

describe('the GET revision lane woken by a change', () => {
  it('answers every held request before it counts any, and counts each once', async () => {
    const events: string[] = [];
    const watch = new RevisionWatch();
    const current = record(1, 'BUILDING');
    const services = {
      auth: { cachedPrincipal: () => ({ keyId: 'k', organizationId: 'o', workspaceId: 'w', organizationScoped: false }) },
      // As Revisions.hold for a client holding the current version: the wait begins on a real watch.
      revisions: { hold: (wait: RevisionWait, waitMs: number) => watch.hold(wait, waitMs) },
      metrics: { httpAnswered: (method: string, _route: string, status: number) => events.push(`counted ${method} ${status}`) },
    } as unknown as Pick<Services, 'auth' | 'revisions' | 'metrics'>;
    server = createServer(revisionFastPath(services, (_req, res) => res.writeHead(500).end()));
    // Each answer noted as the lane writes it (its `end`).
    server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
      const end = res.end.bind(res) as (body: string) => ServerResponse;
      res.end = ((body: string) => {
        events.push(`answered ${res.statusCode}`);
        return end(body);
      }) as ServerResponse['end'];
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;

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
});

function longPoll(port: number, etag: string): Promise<{ status: number; etag: string; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: `/v2/deployments/${DEPLOYMENT}/revisions/${REVISION}`,
        headers: { 'x-api-key': 'key', 'if-none-match': etag, prefer: 'wait=5' },
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
