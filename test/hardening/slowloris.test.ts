import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const MAX_CONNECTIONS = 100;
const HEADERS_TIMEOUT_MS = 2500;
const KEEP_ALIVE_TIMEOUT_MS = 400;

/** Opens a connection that never sends a byte; resolves once connected, with whether and when it was closed. */
function idleConnection(port: number): Promise<{ socket: Socket; closed: Promise<number> }> {
  return new Promise((resolve) => {
    const opened = performance.now();
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    const closed = new Promise<number>((done) => socket.once('close', () => done(performance.now() - opened)));
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('close', () => resolve({ socket, closed }));
  });
}

/** GET over a fresh connection; the status, or the error's code when the connection was refused or cut. */
function get(port: number, path: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    req.end();
  });
}

describe('slowloris: held connections', () => {
  let server: ServerProcess;
  let healthPort: number;
  beforeAll(async () => {
    server = await startServerProcess({
      MAX_CONNECTIONS: String(MAX_CONNECTIONS),
      HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
      KEEP_ALIVE_TIMEOUT_MS: String(KEEP_ALIVE_TIMEOUT_MS),
      HEALTH_PORT: '0',
    });
    const listening = server
      .output()
      .split('\n')
      .find((line) => line.includes('"msg":"listening"'))!;
    healthPort = JSON.parse(listening).health_port;
    expect(healthPort).toBeGreaterThan(0);
  });
  afterAll(() => server?.kill());

  it('while idle connections fill the main port, the health port answers; the server closes them and the main port recovers', async () => {
    const idle = await Promise.all(Array.from({ length: 3 * MAX_CONNECTIONS }, () => idleConnection(server.port)));
    const started = performance.now();
    // The main port holds no more than its cap: it is full, so a new client is cut off now.
    expect(await get(server.port, '/healthz')).not.toBe(200);
    // The health port answers meanwhile (its own connections, its own cap).
    expect(await get(healthPort, '/healthz')).toBe(200);
    expect(await get(healthPort, '/readyz')).toBe(200);
    expect(await get(healthPort, '/v2/deployments')).toBe(404);

    // Connections that never sent a request are closed by the server after the header timeout.
    const closedAfter = await Promise.all(idle.map((c) => c.closed));
    expect(Math.max(...closedAfter)).toBeLessThan(HEADERS_TIMEOUT_MS + 3000);
    await eventually(async () => ((await get(server.port, '/healthz')) === 200 ? true : undefined), 10_000);
    expect(performance.now() - started).toBeLessThan(HEADERS_TIMEOUT_MS + 5000);
  });

  it('an idle keep-alive connection is closed by the server', async () => {
    const socket = connect(server.port, '127.0.0.1');
    socket.on('error', () => undefined);
    const answered = new Promise<void>((resolve) => socket.once('data', () => resolve()));
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now())));
    socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n');
    await answered;
    const at = performance.now();
    // Node adds up to a second of grace to the keep-alive timeout.
    expect((await closed) - at).toBeLessThan(KEEP_ALIVE_TIMEOUT_MS + 2500);
  });

  it('a connection that sends headers slowly is cut off at the header timeout', async () => {
    const socket = connect(server.port, '127.0.0.1');
    socket.on('error', () => undefined);
    const opened = performance.now();
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now() - opened)));
    socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    const drip = setInterval(() => socket.writable && socket.write('X-Slow: a\r\n'), 200);
    try {
      expect(await closed).toBeLessThan(HEADERS_TIMEOUT_MS + 2000);
    } finally {
      clearInterval(drip);
    }
  });
});
