import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { DeploymentProxy } from '../../agent/proxy.ts';

/**
 * The agent's reverse proxy in front of a real upstream on loopback that streams server-sent events
 * forever (as a LangGraph run stream does while the run goes on) and counts its open requests.
 */
describe('the local agent’s reverse proxy', () => {
  let upstream: Server;
  let proxy: DeploymentProxy;
  let proxyPort: number;
  let open = 0;
  beforeAll(async () => {
    upstream = createServer((req, res) => {
      open += 1;
      res.on('close', () => (open -= 1));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: metadata\ndata: {}\n\n');
      const tick = setInterval(() => res.write('event: values\ndata: {}\n\n'), 50);
      res.on('close', () => clearInterval(tick));
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', () => resolve()));
    proxy = new DeploymentProxy();
    proxyPort = await proxy.listen(0, '127.0.0.1');
    proxy.route(['streamer'], (upstream.address() as AddressInfo).port);
  });
  afterAll(async () => {
    await proxy.close();
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  /** Opens a stream through the proxy, reads its first event, then the client goes away. */
  const openAndDrop = () =>
    new Promise<void>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: proxyPort, path: '/runs/stream', method: 'POST', headers: { host: `streamer.localhost:${proxyPort}` } }, (res: IncomingMessage) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? undefined : reject(error)));
      req.end('{}');
    });

  it('ends the upstream request when the client disconnects mid-stream, so streams do not pile up on the upstream', async () => {
    for (let i = 0; i < 20; i += 1) await openAndDrop();
    // Every dropped client's upstream request is ended (before the fix all 20 stayed open).
    await eventually(async () => (open === 0 ? true : undefined), 5000);
    expect(open).toBe(0);
    // The proxy still answers: nothing is left counted in flight for that port.
    await proxy.drained((upstream.address() as AddressInfo).port, 2000);
    await openAndDrop();
    await eventually(async () => (open === 0 ? true : undefined), 5000);
  });
});
