import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { type ServerProcess, startServerProcess } from '../helpers/server-process.ts';

const BUDGET = 1024 * 1024;
const WRONG_SIGNATURE = `sha256=${'0'.repeat(64)}`;

/** Starts a wrong-signature webhook post that declares `declared` bytes and sends only `sent`, then waits. */
function slowUpload(server: ServerProcess, declared: number, sent: number): Socket {
  const socket = connect(server.port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(
    `POST /v1/webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n` +
      `X-Hub-Signature-256: ${WRONG_SIGNATURE}\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: slow-${crypto.randomUUID()}\r\n\r\n`,
  );
  socket.write(Buffer.alloc(sent, 0x20));
  return socket;
}

/** A whole wrong-signature post of `size` bytes: 401 once read, 503 when the budget cannot take it. */
async function post(server: ServerProcess, size: number) {
  const response = await fetch(`${server.url}/v1/webhooks/github`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-hub-signature-256': WRONG_SIGNATURE, 'x-github-event': 'push', 'x-github-delivery': crypto.randomUUID() },
    body: Buffer.alloc(size, 0x20),
  });
  return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as { detail: unknown } };
}

describe('unsigned webhook bodies share a memory budget', () => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await startServerProcess({ GITHUB_WEBHOOK_SECRET: 'budget-test-secret', WEBHOOK_INFLIGHT_BYTES: String(BUDGET), RECONCILE_INTERVAL_MS: '0' });
  });
  afterAll(() => server?.kill());

  it('an upload the client abandons midway is logged once, at info, in one line without a stack (item 11)', async () => {
    const abortLines = () =>
      server
        .output()
        .split('\n')
        .filter((l) => l.includes('request aborted by the client'));
    const socket = slowUpload(server, 450 * 1024, 100 * 1024);
    await new Promise((resolve) => setTimeout(resolve, 300));
    socket.destroy();
    await eventually(async () => (abortLines().length >= 1 ? true : undefined), 5000).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const lines = server.output().split('\n');
    expect(lines.filter((l) => l.includes('"level":"error"'))).toEqual([]);
    expect(abortLines()).toHaveLength(1);
    const line = JSON.parse(abortLines()[0]!);
    expect(line.level).toBe('info');
    expect(JSON.stringify(line)).not.toMatch(/\\n\s+at /);
  });

  it('slow uploads that hold the budget make the next post 503 with Retry-After; aborting them frees it', async () => {
    expect((await post(server, 300 * 1024)).status).toBe(401);
    const slow = [slowUpload(server, 450 * 1024, 100 * 1024), slowUpload(server, 450 * 1024, 100 * 1024)];
    const refused = await eventually(async () => {
      const answer = await post(server, 300 * 1024);
      return answer.status === 503 ? answer : undefined;
    }, 10_000);
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(typeof refused.body.detail).toBe('string');

    for (const socket of slow) socket.destroy();
    // The server's accounting gave the aborted uploads' share back: the same post is read again.
    await eventually(async () => ((await post(server, 300 * 1024)).status === 401 ? true : undefined), 10_000);
  });

  it('a chunked body with no declared length is stopped once it outgrows the budget', async () => {
    const socket = connect(server.port, '127.0.0.1');
    socket.on('error', () => undefined);
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.write(
      `POST /v1/webhooks/github HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n` +
        `X-Hub-Signature-256: ${WRONG_SIGNATURE}\r\nX-GitHub-Event: push\r\nX-GitHub-Delivery: chunked-${crypto.randomUUID()}\r\n\r\n`,
    );
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    // Two chunks past the budget and no more: the server answers 503, reads what is left (its
    // listener drains a refused body for half a second) and closes. A client still writing after
    // that close gets a reset, which on a starved machine could discard the 503 it had not read yet.
    for (let sent = 0; sent < BUDGET + 2 * chunk.length && !answer && !socket.destroyed; sent += chunk.length) {
      socket.write(`${chunk.length.toString(16)}\r\n`);
      socket.write(chunk);
      socket.write('\r\n');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await eventually(async () => (answer ? true : undefined), 5000);
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer.toLowerCase()).toContain('retry-after:');
    socket.destroy();
    expect((await post(server, 300 * 1024)).status).toBe(401);
  });
});
