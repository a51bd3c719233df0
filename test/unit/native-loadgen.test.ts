import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { holdNative, machineJitter, nativeLoadgen, nativeLoadgenMissing, runPacedNative } from '../../bench/lib/native.ts';
import { removeTempDirs } from '../../bench/lib/processes.ts';

/**
 * The benchmark's C load generator (bench/native/loadgen.c) against a real node:http server: it
 * must count what a server answered, the way the server answered it. Built with the machine's C
 * compiler; without one the benchmark falls back to the Node generators, and this is skipped.
 */
const compiler = nativeLoadgen() !== null;

describe.skipIf(!compiler)(`the C load generator${compiler ? '' : ` (skipped: ${nativeLoadgenMissing})`}`, () => {
  let server: Server;
  let url: string;
  const seen: Array<{ method: string; url: string; body: string }> = [];
  const held: ServerResponse[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, body });
        if (req.url === '/length') return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: 'é'.repeat(3000) }));
        if (req.url === '/not-modified') return res.writeHead(304).end();
        if (req.url === '/missing') return res.writeHead(404).end('{"detail":"no"}');
        if (req.url === '/wait') return void held.push(res);
        // Chunked, in two writes some milliseconds apart.
        res.writeHead(201);
        res.write('a'.repeat(3000));
        setTimeout(() => res.end('0\r\n\r\ntail'), 3);
      });
    });
    // Short, so that connections the paced run leaves idle are closed under it (and reopened).
    server.keepAliveTimeout = 150;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    // The request files the generator read.
    removeTempDirs();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('paces every framing, counts a 404 as a failure and sends each body once', async () => {
    seen.length = 0;
    const result = await runPacedNative(url, {
      rate: 40,
      seconds: 1,
      warmupSeconds: 0.5,
      connections: 6,
      requests: [
        { method: 'GET', path: '/length' },
        { method: 'GET', path: '/chunked' },
        { method: 'GET', path: '/not-modified' },
        { method: 'GET', path: '/missing' },
        { method: 'POST', path: '/made', bodyTemplate: '{"name":"n-{{unique}}"}' },
      ],
    });
    // 40 measured after 20 of warm-up, and one per connection to open it.
    expect(seen).toHaveLength(6 + 20 + 40);
    expect(result.requests).toBe(40);
    // Every fifth request is /missing: 8 of the 40 measured.
    expect(result.failures).toBe(8);
    const posted = seen.filter((s) => s.method === 'POST').map((s) => s.body);
    expect(posted.length).toBeGreaterThan(10);
    expect(new Set(posted).size).toBe(posted.length);
    expect(posted.every((body) => /^\{"name":"n-[a-z0-9-]+"\}$/.test(body))).toBe(true);
    expect(result.p50).toBeGreaterThan(0);
    expect(result.p99).toBeGreaterThanOrEqual(result.p50);
    expect(result.rps).toBeGreaterThan(30);
    expect(result.rps).toBeLessThan(50);
  });

  it('reopens connections the server closed while they were idle, losing no request', async () => {
    seen.length = 0;
    // 8 connections for 10 requests a second: most sit idle past the 150 ms keep-alive timeout.
    const result = await runPacedNative(url, { rate: 10, seconds: 1.5, warmupSeconds: 0, connections: 8, requests: [{ method: 'GET', path: '/length' }] });
    expect(result.failures).toBe(0);
    expect(result.reconnects).toBeGreaterThan(0);
    expect(seen).toHaveLength(8 + 15);
  });

  it('holds requests until the server answers them, and reports when the last answer was read', async () => {
    held.length = 0;
    const { connected, answers } = holdNative(`${url}/wait`, { 'x-test': 'held' }, 20);
    await connected;
    while (held.length < 20) await new Promise((resolve) => setTimeout(resolve, 10));
    const released = Date.now();
    for (const res of held) res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"INTERRUPTED"}');
    const result = await answers;
    expect(result.statuses).toEqual(Array(20).fill(200));
    expect(result.bodies).toEqual(['{"status":"INTERRUPTED"}']);
    expect(result.lastAt).toBeGreaterThanOrEqual(released);
    expect(result.firstAt).toBeLessThanOrEqual(result.lastAt);
  });

  it("measures the machine's wake-up lateness in order", async () => {
    const jitter = await machineJitter(0.3);
    // 200 µs sleeps for 0.3 s: several hundred, however late.
    expect(jitter.wakeups).toBeGreaterThan(100);
    expect(jitter.p50Ms).toBeGreaterThanOrEqual(0);
    expect(jitter.p99Ms).toBeGreaterThanOrEqual(jitter.p50Ms);
    expect(jitter.maxMs).toBeGreaterThanOrEqual(jitter.p99Ms);
  });

  it('a holder that cannot connect fails its wait instead of hanging', async () => {
    // A port nothing listens on: the one this server had, once closed, is not reused at once.
    const idle = createServer();
    await new Promise<void>((resolve) => idle.listen(0, '127.0.0.1', resolve));
    const port = (idle.address() as AddressInfo).port;
    await new Promise<void>((resolve) => idle.close(() => resolve()));
    const { connected, answers } = holdNative(`http://127.0.0.1:${port}/wait`, {}, 2);
    await expect(connected).rejects.toThrow(/loadgen hold exited/);
    await expect(answers).rejects.toThrow(/loadgen hold exited/);
  });
});
