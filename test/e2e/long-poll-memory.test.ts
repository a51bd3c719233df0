import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { silentLogger } from '../../server/logger.ts';
import { type RunningServer, startServer } from '../../server/server.ts';
import { testBackendKind } from '../helpers/backends.ts';

/**
 * What one waiting long-poll holds in the server, in bytes, against a bare node:http server holding
 * the same requests (a Set of responses, as bench/baselines/http-fixed.mjs): both in this process,
 * measured as V8's used heap plus the memory JavaScript objects own outside it, after full garbage
 * collections, before and while WAITERS requests are held. The clients are a child process, so
 * their sockets are not counted. A memory bound, not a timing: it holds on a loaded machine.
 *
 * Measured when written (Node 24, 400 waiters): ours 6.4 KB per waiter, the bare server's 4.7 KB
 * (1.37×; before the waiter lost its own timer, the connection its header timer, and the wait its
 * second async function: 7.3 KB, 1.56×). Since the fast lane waits through a callback
 * (`Revisions.whenChanged`, `RevisionWatch.waitThen`) rather than a suspended async function and
 * the promises between it and the lane: 5.8 KB against 4.6–4.7 KB (1.27×). Since the request's
 * state is its own waiter (`HeldRevisionRequest`, a `RevisionWait` held by `Revisions.hold`: no
 * callback, closure or context beside it): 5.2–5.3 KB against 4.7 KB (1.12–1.13×, three runs at
 * load 12–22); with the lane's lighter request (ids sliced, no match array) 5.16 KB against 4.62–4.65
 * (1.11–1.12×, three runs at load 8–14). A waiter that holds a copy of the revision again, or a timer, a promise chain or a
 * few closures and contexts more, moves it past the bounds below.
 */
const WAITERS = 400;
/** Each waiter of ours may hold this many times a bare server's waiter, at most (issue 40's goal is 1.3; 1.12–1.13 measured). */
const MAX_RATIO = 1.2;
/** And this many bytes at most, whatever the bare server holds (a Node whose sockets grow moves both). */
const MAX_BYTES_PER_WAITER = 5_600;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Live bytes after collecting everything collectable (twice: finalizers free more on the second). */
function liveBytes(): number {
  gc();
  gc();
  const memory = process.memoryUsage();
  return memory.heapUsed + memory.external;
}

/** A child that opens `count` connections to `port`, sends `request` on each, says `held` once all are sent, and holds them until its stdin ends. */
function holdRequests(port: number, request: string, count: number): { child: ChildProcess; sent: Promise<void> } {
  const script = `
    const net = require('node:net');
    let sent = 0;
    const request = ${JSON.stringify(request)};
    for (let i = 0; i < ${count}; i++) {
      const socket = net.connect(${port}, '127.0.0.1', () => {
        socket.write(request, () => { if (++sent === ${count}) process.stdout.write('held\\n'); });
      });
      socket.on('error', () => {});
    }
    process.stdin.on('end', () => process.exit(0)).resume();`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const sent = new Promise<void>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('held')) resolve();
    });
    child.once('exit', () => reject(new Error('the holding child exited before holding its requests')));
  });
  return { child, sent };
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** Bytes per held request: live bytes while `WAITERS` are held, less before, over `WAITERS`. */
async function perWaiter(hold: () => Promise<{ release: () => Promise<void> }>): Promise<number> {
  const before = liveBytes();
  const held = await hold();
  const during = liveBytes();
  await held.release();
  return (during - before) / WAITERS;
}

describe.skipIf(testBackendKind() !== 'sqlite')('what a waiting long-poll holds', () => {
  let server: RunningServer;
  let path: string;
  let headers: string;

  beforeAll(async () => {
    const key = `test-${randomBytes(16).toString('hex')}`;
    const config = loadConfig({
      PORT: '0',
      DATABASE_URL: join(mkdtempSync(join(tmpdir(), 'cp-long-poll-memory-')), 'control-plane.db'),
      BOOTSTRAP_API_KEY: key,
      // The revision stays where it is for the whole test: only the test's change wakes the waiters.
      SANDBOX_STAGE_MS: '3600000',
      SQLITE_SYNCHRONOUS: 'NORMAL',
    });
    server = await startServer(config, { log: silentLogger, print: () => {} });
    const base = `http://127.0.0.1:${server.port}`;
    const auth = { 'x-api-key': key, 'content-type': 'application/json' };
    const listeners = (await (await fetch(`${base}/v2/listeners`, { headers: auth })).json()) as { resources: Array<{ id: string }> };
    const created = (await (
      await fetch(`${base}/v2/deployments`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({
          name: `memory-${randomBytes(4).toString('hex')}`,
          source: 'external_docker',
          source_config: { listener_id: listeners.resources[0]!.id },
          source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.0.0' },
        }),
      })
    ).json()) as { id: string; latest_revision_id: string };
    path = `/v2/deployments/${created.id}/revisions/${created.latest_revision_id}`;
    // A plain GET first: the key's check is cached, as for any client polling (the fast lane answers).
    const etag = (await fetch(`${base}${path}`, { headers: auth })).headers.get('etag')!;
    headers = `X-Api-Key: ${key}\r\nIf-None-Match: ${etag}\r\nPrefer: wait=60\r\n`;
  });
  afterAll(async () => {
    await server?.close();
  });

  it(`holds no more than ${MAX_RATIO}× a bare node:http server's bytes per waiter, and at most ${MAX_BYTES_PER_WAITER} bytes`, async () => {
    const bareServer = createServer((_req, res) => {
      waiting.add(res);
      res.on('close', () => waiting.delete(res));
    });
    const waiting = new Set<ServerResponse>();
    await new Promise<void>((resolve) => bareServer.listen(0, '127.0.0.1', resolve));
    const barePort = (bareServer.address() as AddressInfo).port;
    const request = (host: number, extra: string) => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${host}\r\n${extra}\r\n`;

    /** Holds WAITERS requests on `port` until released: the clients go away, and the server lets each request go. */
    const holding = (port: number, extra: string, size: () => number) => async () => {
      const clients = holdRequests(port, request(port, extra), WAITERS);
      await clients.sent;
      await until(() => size() === WAITERS);
      return {
        release: async () => {
          clients.child.stdin!.end();
          await until(() => size() === 0);
        },
      };
    };
    // The same request bytes to both (the key, the ETag and the wait): the bare server keeps them too.
    const bare = holding(barePort, headers, () => waiting.size);
    const ours = holding(server.port, headers, () => server.services.watch.size);
    // Warm both (code compiled, pools grown), then measure each five times, alternating, keeping the
    // median: a collection that fell inside one measure reads high, and one that freed earlier
    // garbage reads low (a CI run read the bare server at 4,188 bytes once against 4,587 twice,
    // and the lowest of each side gave 1.22 where the medians gave 1.13).
    await (await bare()).release();
    await (await ours()).release();
    const bareBytes: number[] = [];
    const ourBytes: number[] = [];
    for (let round = 0; round < 5; round++) {
      bareBytes.push(await perWaiter(bare));
      ourBytes.push(await perWaiter(ours));
    }
    bareServer.close();
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
    const bareEach = median(bareBytes);
    const ourEach = median(ourBytes);
    console.log(
      `bytes per waiter: ours ${ourBytes.map(Math.round).join(', ')}; bare ${bareBytes.map(Math.round).join(', ')}; ratio ${(ourEach / bareEach).toFixed(2)}`,
    );
    expect(ourEach).toBeLessThanOrEqual(MAX_BYTES_PER_WAITER);
    expect(ourEach / bareEach).toBeLessThanOrEqual(MAX_RATIO);
  });
});
