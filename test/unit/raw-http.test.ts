import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RawConnection, requestBytes } from '../../bench/lib/raw-http.ts';

/** The benchmark's paced generator reads answers itself: every framing a node:http server sends must end where it ends. */
describe("the paced generator's raw HTTP client", () => {
  let server: Server;
  let port: number;
  const bodies: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        bodies.push(`${req.method} ${req.url} ${req.headers['x-test'] ?? ''} ${body}`);
        if (req.url === '/length') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: 'é'.repeat(5000) }));
        if (req.url === '/not-modified') return res.writeHead(304).end();
        if (req.url === '/missing') return res.writeHead(404).end('{"detail":"no"}');
        if (req.url === '/close') return req.socket.destroy();
        // Chunked, written in pieces over time, split across TCP reads.
        res.writeHead(201);
        res.write('a'.repeat(3000));
        setTimeout(() => res.end('tail'), 5);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const ask = (connection: RawConnection, path: string, method = 'GET', body?: string) =>
    new Promise<number>((resolve) =>
      connection.send(requestBytes(`127.0.0.1:${port}`, { method, path, headers: { 'x-test': 'yes' }, ...(body !== undefined ? { body } : {}) }), resolve),
    );

  it('answers each status in turn on one keep-alive connection, whatever the framing', async () => {
    const connection = new RawConnection('127.0.0.1', port);
    try {
      const statuses = [];
      for (const path of ['/length', '/chunked', '/not-modified', '/missing', '/length', '/chunked']) statuses.push(await ask(connection, path));
      expect(statuses).toEqual([200, 201, 304, 404, 200, 201]);
      expect(await ask(connection, '/length', 'POST', '{"name":"é"}')).toBe(200);
      expect(bodies.at(-1)).toBe('POST /length yes {"name":"é"}');
      expect(connection.busy).toBe(false);
    } finally {
      connection.close();
    }
  });

  it('hands each answer its whole body: by Content-Length, chunked (framing removed), none for 304', async () => {
    const connection = new RawConnection('127.0.0.1', port);
    const answer = (path: string) =>
      new Promise<{ status: number; body: string }>((resolve) =>
        connection.send(requestBytes(`127.0.0.1:${port}`, { method: 'GET', path, headers: {} }), (status, body) =>
          resolve({ status, body: body.toString('utf8') }),
        ),
      );
    try {
      await connection.connected;
      expect(await answer('/length')).toEqual({ status: 200, body: JSON.stringify({ ok: 'é'.repeat(5000) }) });
      expect(await answer('/chunked')).toEqual({ status: 201, body: `${'a'.repeat(3000)}tail` });
      expect(await answer('/not-modified')).toEqual({ status: 304, body: '' });
      expect(await answer('/missing')).toEqual({ status: 404, body: '{"detail":"no"}' });
    } finally {
      connection.close();
    }
  });

  it('answers 0 when the server closes the connection, and for every later request on it', async () => {
    const connection = new RawConnection('127.0.0.1', port);
    expect(await ask(connection, '/close')).toBe(0);
    expect(await ask(connection, '/length')).toBe(0);
    connection.close();
  });
});
