import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The long-poll benches' floor: a bare node:http server on a loopback port that holds every request
 * (`held`) until `release` answers them all, in one synchronous loop, with the server's headers and
 * the body serialized once.
 */
export async function bareHoldingServer() {
  const held: ServerResponse[] = [];
  const server = createServer((_req, res) => void held.push(res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    held,
    port: (server.address() as AddressInfo).port,
    release(body: string, etag: string): void {
      const length = Buffer.byteLength(body);
      for (const res of held) {
        res.writeHead(200, { 'x-request-id': randomUUID(), 'content-type': 'application/json', etag, 'cache-control': 'no-cache', 'Content-Length': length });
        res.end(body);
      }
      held.length = 0;
    },
  };
}
