import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** Incompressible gzip data of about `bytes` bytes (the server checks only the gzip magic at upload). */
const blob = (bytes: number) => gzipSync(randomBytes(bytes), { level: 0 });

/**
 * One workspace cannot fill the disk every workspace's database lives on: its complete tarballs
 * count against UPLOAD_WORKSPACE_QUOTA_BYTES, a deployment holds at most 5 open URLs, and tarballs
 * no revision names are swept a URL lifetime after upload even if nobody asks for another URL.
 */
describe('upload quota, open-URL cap and sweep', () => {
  const first = blob(4000);
  // The server's clock, moved by the test: a URL lifetime passes when the test says, not when a
  // busy machine happens to take a second over five requests.
  let offsetMs = 0;
  const clock = { now: () => new Date(Date.now() + offsetMs).toISOString() };
  const aLifetimePasses = () => {
    offsetMs += 1100;
  };
  let t: App;
  let base: string;
  let server: ServerType;
  beforeAll(async () => {
    t = await inProcessApp({ stageMs: 5, clock, env: { UPLOAD_WORKSPACE_QUOTA_BYTES: String(first.length + 100), UPLOAD_URL_TTL_SECONDS: '1' } });
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    await t.close();
  });

  const deployment = async () => (await t.api.post('/v2/deployments', { name: uniqueName(), source: 'internal_source' })).body.id as string;
  const issue = (id: string) => t.api.post(`/v2/deployments/${id}/upload-url`);
  const put = async (uploadUrl: string, body: Buffer) => {
    const url = new URL(uploadUrl);
    const response = await fetch(`${base}${url.pathname}${url.search}`, { method: 'PUT', headers: { 'content-type': 'application/gzip' }, body });
    return { status: response.status, body: (await response.json()) as { detail?: string; object_path?: string } };
  };
  /** One number from the database (PostgreSQL answers counts and sums as text). */
  const count = async (text: string, ...params: unknown[]) => Number(((await t.sql.get(text, ...params)) as { n: number | string }).n);
  const storedBytes = () => count("SELECT coalesce(sum(size), 0) AS n FROM uploads WHERE state = 'complete'");

  it("a tarball that does not fit in what is left of the workspace's quota is refused (413) and nothing is stored", async () => {
    const id = await deployment();
    expect((await put((await issue(id)).body.upload_url, first)).status).toBe(200);
    expect(await storedBytes()).toBe(first.length);
    const second = await put((await issue(id)).body.upload_url, blob(4000));
    expect(second.status).toBe(413);
    expect(second.body.detail).toMatch(/quota/);
    expect(await storedBytes()).toBe(first.length);
    expect(await count("SELECT count(*) AS n FROM upload_chunks c JOIN uploads u ON u.id = c.upload_id WHERE u.state <> 'complete'")).toBe(0);
  });

  it('a workspace at its quota gets no new upload URL (400 naming the quota)', async () => {
    const id = await deployment();
    // Exactly what is left of the quota (100 bytes): accepted, and the workspace is then at its quota.
    let fill = blob(50);
    for (let n = 50; fill.length < 100; n++) fill = blob(n);
    expect(fill.length).toBe(100);
    expect((await put((await issue(id)).body.upload_url, fill)).status).toBe(200);
    const refused = await issue(id);
    expect(refused.status).toBe(400);
    expect(refused.body.detail).toMatch(/UPLOAD_WORKSPACE_QUOTA_BYTES/);
  });

  it('a deployment holds at most 5 open URLs; the sweep drops unused tarballs and expired URLs of every deployment', async () => {
    // Make room: the sweep removes the complete tarballs no revision names, once a URL lifetime (1 s) has passed.
    aLifetimePasses();
    const removed = await t.services.uploads.sweep();
    expect(removed).toBeGreaterThanOrEqual(2);
    expect(await storedBytes()).toBe(0);

    const id = await deployment();
    for (let i = 0; i < 5; i++) expect((await issue(id)).status).toBe(200);
    const sixth = await issue(id);
    expect(sixth.status).toBe(409);
    expect(sixth.body.detail).toMatch(/5 upload URLs open/);
    // Once they expire, the deployment may have new ones.
    aLifetimePasses();
    expect((await issue(id)).status).toBe(200);
  });

  it('a tarball a revision names is kept by the sweep', async () => {
    const id = await deployment();
    const issued = (await issue(id)).body;
    expect((await put(issued.upload_url, blob(100))).status).toBe(200);
    const patched = await t.api.patch(`/v2/deployments/${id}`, {
      revision_source: 'internal_source',
      source_revision_config: { source_tarball_path: issued.object_path, langgraph_config_path: 'langgraph.json' },
    });
    expect(patched.status).toBe(200);
    aLifetimePasses();
    await t.services.uploads.sweep();
    expect(await count("SELECT count(*) AS n FROM uploads WHERE object_path = ? AND state = 'complete'", issued.object_path)).toBe(1);
  });
});
