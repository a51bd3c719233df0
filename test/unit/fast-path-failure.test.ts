import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { RevisionWait } from '../../server/domain/revision-wait.ts';
import { revisionFastPath } from '../../server/http/revision-fast-lane.ts';
import { RevisionWatch } from '../../server/lib/revision-watch.ts';
import type { Services } from '../../server/services.ts';

// The fast path's failure hand-over to Hono, on a real loopback server. The services are stand-ins
// (a cached key, a revision read that fails) because the failure under test — the store refusing
// the re-read after a long-poll's wait — cannot be caused on demand in a real store mid-wait.

const DEPLOYMENT = '11111111-1111-4111-8111-111111111111';
const REVISION = '22222222-2222-4222-8222-222222222222';

let server: Server | undefined;
afterEach(() => server?.close());

/** A server whose fast path fails the read; answers what the fallback (Hono's place) was given. */
async function failingServer(failAfterWait: boolean) {
  const handedOn: Array<{ prefer: string | undefined; rawPrefer: boolean }> = [];
  const services = {
    auth: { cachedPrincipal: () => ({ keyId: 'k', organizationId: 'o', workspaceId: 'w', organizationScoped: false }) },
    revisions: {
      // As Revisions.hold: the first read fails (before any wait), or the wait begins on a real
      // watch and the read after registering fails.
      hold: (wait: RevisionWait, waitMs: number) => {
        const refused = new Error('the storage refused the read');
        if (failAfterWait && waitMs > 0) {
          new RevisionWatch().hold(wait, waitMs);
          setImmediate(() => wait.failed(refused));
        } else setImmediate(() => wait.answered(refused));
      },
    },
    metrics: { httpAnswered() {} },
  } as unknown as Pick<Services, 'auth' | 'revisions' | 'metrics'>;
  const fallback = (req: IncomingMessage, res: import('node:http').ServerResponse) => {
    handedOn.push({ prefer: req.headers.prefer as string | undefined, rawPrefer: req.rawHeaders.some((h) => h.toLowerCase() === 'prefer') });
    res.writeHead(503).end();
  };
  server = createServer(revisionFastPath(services, fallback));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, handedOn };
}

function longPoll(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: `/v2/deployments/${DEPLOYMENT}/revisions/${REVISION}`,
        headers: { 'x-api-key': 'key', 'if-none-match': '"x"', prefer: 'wait=5' },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode!);
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('the GET revision fast path, when the read fails', () => {
  it('after the wait began: hands the request to Hono without its Prefer, so the client does not wait twice', async () => {
    const { port, handedOn } = await failingServer(true);
    expect(await longPoll(port)).toBe(503);
    expect(handedOn).toEqual([{ prefer: undefined, rawPrefer: false }]);
  });

  it('before any wait (an unknown revision): hands the request to Hono as it came', async () => {
    const { port, handedOn } = await failingServer(false);
    expect(await longPoll(port)).toBe(503);
    expect(handedOn).toEqual([{ prefer: 'wait=5', rawPrefer: true }]);
  });
});
