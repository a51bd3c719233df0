import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterEach, describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { testBackendKind, testDatabaseUrl } from '../helpers/backends.ts';
import { uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/**
 * The workspace upload quota holds under concurrent PUTs: 8 PUTs of 3 MiB at once against a
 * 10 MiB quota store at most 10 MiB together (at most three of them), the others answer 413 and
 * leave nothing behind. Half the PUTs declare their length (reserved before the body is read),
 * half are chunked (reserved chunk by chunk). On PostgreSQL also with the PUTs spread over two
 * control planes on one database, as over two server processes.
 */

type App = Awaited<ReturnType<typeof inProcessApp>>;
const MiB = 1024 * 1024;
const QUOTA = 10 * MiB;
/** The server checks only the gzip magic at upload: 3 MiB that start like gzip. */
const tarball = () => Buffer.concat([Buffer.from([0x1f, 0x8b]), randomBytes(3 * MiB - 2)]);

const opened: Array<{ app: App; server: ServerType }> = [];
afterEach(async () => {
  for (const { app, server } of opened.splice(0)) {
    await new Promise<void>((r) => server.close(() => r()));
    await app.close();
  }
});

async function processesOnOneDatabase(count: number): Promise<Array<{ app: App; base: string }>> {
  const url = await testDatabaseUrl(testBackendKind());
  const secretBox = new SecretBox(randomBytes(32));
  const running: Array<{ app: App; base: string }> = [];
  for (let i = 0; i < count; i++) {
    const app = await inProcessApp({ path: url, secretBox, processId: `process-${i}`, env: { UPLOAD_WORKSPACE_QUOTA_BYTES: String(QUOTA) } });
    const server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: app.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    opened.push({ app, server });
    running.push({ app, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  }
  return running;
}

async function race(processes: Array<{ app: App; base: string }>) {
  const { app } = processes[0]!;
  // Two deployments: one holds at most 5 open upload URLs.
  const urls: string[] = [];
  for (let d = 0; d < 2; d++) {
    const id = (await app.api.post('/v2/deployments', { name: uniqueName('quota-race'), source: 'internal_source' })).body.id as string;
    for (let i = 0; i < 4; i++) urls.push((await app.api.post(`/v2/deployments/${id}/upload-url`)).body.upload_url as string);
  }
  const answers = await Promise.all(
    urls.map(async (uploadUrl, i) => {
      const url = new URL(uploadUrl);
      const body = tarball();
      const { base } = processes[i % processes.length]!;
      // Odd PUTs are chunked: no Content-Length, so their bytes are reserved as they arrive.
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < body.length; offset += 256 * 1024) controller.enqueue(body.subarray(offset, offset + 256 * 1024));
          controller.close();
        },
      });
      const response = await fetch(`${base}${url.pathname}${url.search}`, {
        method: 'PUT',
        headers: { 'content-type': 'application/gzip', ...(i % 2 === 0 ? { 'content-length': String(body.length) } : {}) },
        body: i % 2 === 0 ? body : stream,
        duplex: 'half',
      } as RequestInit);
      await response.arrayBuffer();
      return response.status;
    }),
  );
  const stored = Number(((await app.sql.get("SELECT coalesce(sum(size), 0) AS n FROM uploads WHERE state = 'complete'")) as { n: number | string }).n);
  const chunkBytes = Number(
    (
      (await app.sql.get(`SELECT coalesce(sum(${testBackendKind() === 'postgres' ? 'octet_length' : 'length'}(data)), 0) AS n FROM upload_chunks`)) as {
        n: number | string;
      }
    ).n,
  );
  const reserved = Number(((await app.sql.get('SELECT coalesce(sum(reserved_bytes), 0) AS n FROM uploads')) as { n: number | string }).n);
  return { answers, stored, chunkBytes, reserved };
}

describe(`the workspace upload quota under concurrent PUTs (${testBackendKind()})`, () => {
  it('8 PUTs of 3 MiB at once against a 10 MiB quota store at most 10 MiB; the rest are 413 and leave nothing', async () => {
    const { answers, stored, chunkBytes, reserved } = await race(await processesOnOneDatabase(1));
    expect(answers.filter((s) => s === 200).length).toBeGreaterThanOrEqual(1);
    expect(answers.filter((s) => s === 200).length).toBeLessThanOrEqual(3);
    expect(
      answers.every((s) => s === 200 || s === 413),
      JSON.stringify(answers),
    ).toBe(true);
    expect(stored).toBeLessThanOrEqual(QUOTA);
    expect(stored).toBe(answers.filter((s) => s === 200).length * 3 * MiB);
    // Nothing of a refused PUT is left: no chunk rows beyond the complete tarballs, no reservation.
    expect(chunkBytes).toBe(stored);
    expect(reserved).toBe(0);
  });

  it.runIf(testBackendKind() === 'postgres')('holds across two server processes on one database', async () => {
    const { answers, stored, chunkBytes, reserved } = await race(await processesOnOneDatabase(2));
    expect(
      answers.every((s) => s === 200 || s === 413),
      JSON.stringify(answers),
    ).toBe(true);
    expect(stored).toBeLessThanOrEqual(QUOTA);
    expect(stored).toBe(answers.filter((s) => s === 200).length * 3 * MiB);
    expect(chunkBytes).toBe(stored);
    expect(reserved).toBe(0);
  });
});
