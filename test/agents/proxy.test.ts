import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyChecker } from '../../agent/key-check.ts';
import { DeploymentProxy } from '../../agent/proxy.ts';
import { ProxyClient } from '../../agent/proxy-client.ts';
import { upstreamKey } from '../../agent/upstream.ts';
import { eventually } from '../helpers/api.ts';

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
    upstream = createServer((_req, res) => {
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
    proxy.route({ deploymentId: 'streamer', hosts: ['streamer'], upstream: { port: (upstream.address() as AddressInfo).port } });
  });
  afterAll(async () => {
    await proxy.close();
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
  });

  /** Opens a stream through the proxy, reads its first event, then the client goes away. */
  const openAndDrop = () =>
    new Promise<void>((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: proxyPort, path: '/runs/stream', method: 'POST', headers: { host: `streamer.localhost:${proxyPort}` } },
        (res: IncomingMessage) => {
          res.once('data', () => {
            req.destroy();
            resolve();
          });
        },
      );
      req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'ECONNRESET' ? undefined : reject(error)));
      req.end('{}');
    });

  it('ends the upstream request when the client disconnects mid-stream, so streams do not pile up on the upstream', async () => {
    for (let i = 0; i < 20; i += 1) await openAndDrop();
    // Every dropped client's upstream request is ended (before the fix all 20 stayed open).
    await eventually(async () => (open === 0 ? true : undefined), 5000);
    expect(open).toBe(0);
    // The proxy still answers: nothing is left counted in flight for that port.
    await proxy.drained(upstreamKey({ port: (upstream.address() as AddressInfo).port }), 2000);
    await openAndDrop();
    await eventually(async () => (open === 0 ? true : undefined), 5000);
  });
});

/** Routing by host and by path, with names in their URL form: two upstreams that answer who they are. */
describe('the proxy’s routes', () => {
  it('serves a deployment by host and by /d/<name>/ (prefix stripped); names differing only in case or _/- never share a route', async () => {
    const upstreams: Server[] = [];
    const answering = async (who: string) => {
      const server = createServer((req, res) => res.end(JSON.stringify({ who, path: req.url })));
      upstreams.push(server);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      return (server.address() as AddressInfo).port;
    };
    const { dnsSafeName } = await import('../../shared/dns-safe-name.ts');
    const proxy = new DeploymentProxy();
    const port = await proxy.listen(0, '127.0.0.1');
    proxy.route({ deploymentId: 'd1', hosts: [dnsSafeName('my-agent')], upstream: { port: await answering('my-agent') } });
    proxy.route({ deploymentId: 'd2', hosts: [dnsSafeName('My_Agent')], upstream: { port: await answering('My_Agent') } });
    try {
      // A plain fetch by path: no name to resolve.
      const byPath = (await (await fetch(`http://127.0.0.1:${port}/d/my-agent/threads?limit=1`)).json()) as { who: string; path: string };
      expect(byPath).toEqual({ who: 'my-agent', path: '/threads?limit=1' });
      const other = (await (await fetch(`http://127.0.0.1:${port}/d/${dnsSafeName('My_Agent')}/ok`)).json()) as { who: string; path: string };
      expect(other).toEqual({ who: 'My_Agent', path: '/ok' });
      expect(dnsSafeName('My_Agent')).not.toBe('my-agent');
      const byHost = await new Promise<string>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: '/ok', headers: { host: `my-agent.localhost:${port}` } }, (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve(text));
        });
        req.on('error', reject);
        req.end();
      });
      expect(JSON.parse(byHost)).toEqual({ who: 'my-agent', path: '/ok' });
      expect((await fetch(`http://127.0.0.1:${port}/d/nobody/ok`)).status).toBe(404);
    } finally {
      await proxy.close({ idleGraceMs: 0 });
      for (const server of upstreams) {
        server.closeAllConnections();
        server.close();
      }
    }
  });
});

/**
 * The agent's real proxy process (proxy-main.ts) driven through ProxyClient, as the agent drives it.
 * A deployment's first revision is routed under its placeholder URL's host, a later one under its
 * custom_url's: before the table was keyed by deployment, the first entry was never removed and the
 * deleted deployment answered 502 under its old host for ever.
 */
describe('proxy routes leave with their deployment', () => {
  it('answers 404, not 502, for every host and path a deleted deployment ever had', async () => {
    const workDir = mkdtempSync(join(tmpdir(), 'cp-proxy-routes-'));
    const server = createServer((req, res) => res.end(JSON.stringify({ path: req.url })));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const upstream = { port: (server.address() as AddressInfo).port };
    const client = new ProxyClient(workDir);
    const port = await client.listen(0, '127.0.0.1');
    await client.publish();
    const status = (host: string, path = '/ok') =>
      new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    try {
      client.route('deployment-1', ['my-agent', 'my-agent.placeholder.example.com'], upstream);
      client.route('deployment-1', ['my-agent', 'agents.example.org'], upstream);
      await client.publish();
      expect(await status('agents.example.org')).toBe(200);
      client.unroute('deployment-1');
      await client.publish();
      // The upstream still answers: anything but 404 here would be a route that outlived the deployment.
      for (const host of ['my-agent.localhost', 'my-agent.placeholder.example.com', 'agents.example.org']) expect(await status(host)).toBe(404);
      expect(await status('127.0.0.1', '/d/my-agent/ok')).toBe(404);
    } finally {
      await client.close(true);
      server.closeAllConnections();
      rmSync(workDir, { recursive: true, force: true });
    }
  });
});

/**
 * The proxy's key check with an upstream that echoes the headers it got. The control plane here is
 * a stand-in on loopback answering POST /v2/agent/verify-key as the real route does (the real route
 * is tested in verify-key.test.ts, the whole path in deployment-keys.test.ts); it counts questions.
 */
describe('the proxy’s key check', () => {
  it('removes X-Api-Key before the server, keeps an answer for its time only, and answers 503 when the control plane cannot say', async () => {
    let asked = 0;
    let answering = true;
    const controlPlane = createServer((req, res) => {
      let text = '';
      req.on('data', (chunk: Buffer) => (text += chunk.toString()));
      req.on('end', () => {
        asked += 1;
        if (!answering) return res.writeHead(500).end('{}');
        const { key } = JSON.parse(text) as { key: string };
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify(key === 'good' ? { allowed: true } : { allowed: false, reason: 'invalid' }));
      });
    });
    const echo = createServer((req, res) => res.end(JSON.stringify(req.headers)));
    for (const server of [controlPlane, echo]) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const proxy = new DeploymentProxy();
    const port = await proxy.listen(0, '127.0.0.1');
    proxy.checkKeys(new KeyChecker({ url: `http://127.0.0.1:${(controlPlane.address() as AddressInfo).port}`, token: 'lat_test', ttlMs: 60_000 }));
    proxy.route({ deploymentId: 'dep', hosts: ['echo'], upstream: { port: (echo.address() as AddressInfo).port } });
    const call = async (key?: string) => {
      const response = await fetch(`http://127.0.0.1:${port}/d/echo/info`, { headers: key ? { 'x-api-key': key } : {} });
      return { status: response.status, body: (await response.json()) as Record<string, string> };
    };
    try {
      const served = await call('good');
      expect(served.status).toBe(200);
      expect(served.body['x-api-key']).toBeUndefined();
      // Kept: no second question for the same key and deployment (the cache is capped at 30 s whatever is asked).
      expect((await call('good')).status).toBe(200);
      expect(asked).toBe(1);
      expect((await call('bad')).status).toBe(401);
      answering = false;
      expect((await call('other')).status).toBe(503);
    } finally {
      await proxy.close({ idleGraceMs: 0 });
      for (const server of [controlPlane, echo]) {
        server.closeAllConnections();
        server.close();
      }
    }
  });
});
