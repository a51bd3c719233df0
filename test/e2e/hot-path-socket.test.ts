import { connect } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually } from '../helpers/api.ts';
import { dockerBody, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';

/** One raw HTTP/1.1 request (headers exactly as given, repeats included); answers status line and headers. */
function rawRequest(port: number, lines: string[]): Promise<{ status: number; head: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write([...lines, 'Host: 127.0.0.1', 'Connection: close', '', ''].join('\r\n')));
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString()));
    socket.on('end', () => resolve({ status: Number(data.split(' ')[1]), head: data.split('\r\n\r\n')[0]!.toLowerCase() }));
    socket.on('error', reject);
  });
}

/**
 * The hot path reads headers from Node's request and answers with plain-object headers; requests
 * through `app.request()` (the in-process tests) take the `Headers` path. Both must answer the same.
 */
describe('GET revision over a real socket answers as in process', () => {
  let t: Awaited<ReturnType<typeof inProcessApp>>;
  let server: ServerType;
  let port: number;
  let path: string;

  beforeAll(async () => {
    t = await inProcessApp();
    await workspaceFixtures(t.api);
    // A k8s listener's revision waits in AWAITING_DEPLOY: it holds still under the test.
    const k8s = await t.api.post('/v2/listeners', {
      compute_type: 'k8s',
      compute_id: `k8s-${uniqueName()}`,
      compute_config: { k8s_license_secret: 'langgraph-license' },
    });
    const created = await t.api.post('/v2/deployments', dockerBody(uniqueName(), k8s.body.id));
    path = `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`;
    await new Promise((r) => setTimeout(r, 20));
    server = await new Promise<ServerType>((resolve) => {
      const s = serve({ fetch: t.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
    });
    port = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
    t.close();
  });

  it('same status, body, ETag, Cache-Control and content type both ways', async () => {
    const local = await t.app.request(path, { headers: { 'x-api-key': t.apiKey } });
    const remote = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { 'x-api-key': t.apiKey } });
    expect(remote.status).toBe(200);
    expect(await remote.text()).toBe(await local.text());
    for (const name of ['etag', 'cache-control', 'content-type']) expect(remote.headers.get(name), name).toBe(local.headers.get(name));
    const etag = remote.headers.get('etag')!;
    const notModified = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { 'x-api-key': t.apiKey, 'if-none-match': `W/${etag}` } });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.get('etag')).toBe(etag);
    expect(notModified.headers.get('cache-control')).toBe('no-cache');
  });

  it('header forms: a bearer key, a key with spaces around it, a repeated Authorization (401 as Headers would join it)', async () => {
    expect((await rawRequest(port, [`GET ${path} HTTP/1.1`, `Authorization: Bearer ${t.apiKey}`])).status).toBe(200);
    expect((await rawRequest(port, [`GET ${path} HTTP/1.1`, `X-Api-Key:   ${t.apiKey}  `])).status).toBe(200);
    // Node keeps only the first Authorization; `Headers.get` joins both, which is not one bearer token.
    const repeated = [`GET ${path} HTTP/1.1`, `Authorization: Bearer ${t.apiKey}`, 'Authorization: Bearer other'];
    expect((await rawRequest(port, repeated)).status).toBe(401);
    expect(
      (
        await t.app.request(path, {
          headers: [
            ['authorization', `Bearer ${t.apiKey}`],
            ['authorization', 'Bearer other'],
          ],
        })
      ).status,
    ).toBe(401);
  });

  it('a revoked key is refused on its very next request, though its hash was cached', async () => {
    const created = await t.api.post('/v1/api-keys', { description: 'revoked next' });
    const remote = apiClient(`http://127.0.0.1:${port}`, created.body.key);
    for (let i = 0; i < 3; i += 1) expect((await remote.get(path)).status).toBe(200);
    expect((await t.api.delete(`/v1/api-keys/${created.body.id}`)).status).toBe(204);
    expect((await remote.get(path)).status).toBe(401);
  });

  it('X-Tenant-Id read from the socket: a workspace-scoped key naming another workspace is 403', async () => {
    const created = await t.api.post('/v1/api-keys', { description: 'scoped', workspace_id: t.workspaceId });
    const other = await t.api.post('/v1/workspaces', { name: uniqueName('ws') });
    const remote = apiClient(`http://127.0.0.1:${port}`, created.body.key, { 'x-tenant-id': other.body.id });
    expect((await remote.get(path)).status).toBe(403);
    expect((await apiClient(`http://127.0.0.1:${port}`, created.body.key, { 'x-tenant-id': t.workspaceId.toUpperCase() }).get(path)).status).toBe(200);
  });

  it("a held long-poll is released when its client goes away (Node's close, not the Request signal), and many are woken by one change", async () => {
    const etag = (await fetch(`http://127.0.0.1:${port}${path}`, { headers: { 'x-api-key': t.apiKey } })).headers.get('etag')!;
    const held = { 'x-api-key': t.apiKey, 'if-none-match': etag, prefer: 'wait=30' };
    const before = t.services.watch.size;
    const gone = new AbortController();
    const abandoned = fetch(`http://127.0.0.1:${port}${path}`, { headers: held, signal: gone.signal }).catch(() => 'aborted');
    await eventually(async () => (t.services.watch.size === before + 1 ? true : undefined), 5000, 10);
    gone.abort();
    expect(await abandoned).toBe('aborted');
    await eventually(async () => (t.services.watch.size === before ? true : undefined), 5000, 10);

    const waiting = Array.from({ length: 20 }, () => fetch(`http://127.0.0.1:${port}${path}`, { headers: held }));
    await eventually(async () => (t.services.watch.size === before + 20 ? true : undefined), 5000, 10);
    const interrupted = await t.api.post(`${path}/interrupt`);
    expect(interrupted.status).toBe(200);
    const answers = await Promise.all(waiting);
    const bodies = await Promise.all(answers.map((a) => a.text()));
    expect(answers.every((a) => a.status === 200 && a.headers.get('etag') !== etag)).toBe(true);
    expect(new Set(bodies).size).toBe(1);
    expect(JSON.parse(bodies[0]!).status).toBe('INTERRUPTED');
    expect(t.services.watch.size).toBe(before);
  });
});
