import { createHash } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ServerType, serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { revisionReaches, uniqueName } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { openRawSql } from '../helpers/raw-sql.ts';
import { startServerProcess } from '../helpers/server-process.ts';
import { agentProject, gzipTarball } from '../helpers/tarball.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/** The app on a real loopback port, so uploads go through a real HTTP body stream. */
async function served(app: App): Promise<{ url: string; close(): Promise<void> }> {
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch: app.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

type Put = { status: number; body: any };

/**
 * A raw HTTP PUT. `parts` are written one by one; `between` runs after each (to look at the
 * database while the request is still open). No Content-Length unless `declared` is given.
 */
function put(url: string, parts: Buffer[], options: { declared?: number; between?: (index: number) => Promise<void> } = {}): Promise<Put> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const req = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: 'PUT',
        path: target.pathname + target.search,
        // A fresh connection each time: a server that answered early may close a kept-alive one.
        agent: false,
        headers: { 'content-type': 'application/gzip', ...(options.declared !== undefined ? { 'content-length': String(options.declared) } : {}) },
      },
      (res) => {
        answered = true;
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : null }));
      },
    );
    // A server that answers early (413) and closes may make the rest of the writes fail: the answer counts.
    let answered = false;
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    void (async () => {
      for (let i = 0; i < parts.length; i++) {
        if (req.destroyed) return;
        if (!req.write(parts[i]!)) await new Promise((r) => req.once('drain', r));
        await options.between?.(i);
      }
      req.end();
    })().catch((error: unknown) => {
      if (!answered) reject(error);
    });
  });
}

describe('internal_source uploads', () => {
  const cap = 3 * 1024 * 1024;
  let t: App;
  let http: { url: string; close(): Promise<void> };
  beforeAll(async () => {
    t = await inProcessApp({ stageMs: 5, env: { UPLOAD_MAX_BYTES: String(cap) } });
    http = await served(t);
  });
  afterAll(async () => {
    await http.close();
    t.close();
  });

  const chunkCount = async (uploadId?: string) =>
    (uploadId
      ? await t.sql.get('SELECT count(*) AS n FROM upload_chunks WHERE upload_id = ?', uploadId)
      : await t.sql.get('SELECT count(*) AS n FROM upload_chunks')) as { n: number };
  const state = async (uploadId: string) => ((await t.sql.get('SELECT state FROM uploads WHERE id = ?', uploadId)) as { state: string } | undefined)?.state;

  async function newDeployment(): Promise<string> {
    const created = await t.api.post('/v2/deployments', {
      name: uniqueName(),
      source: 'internal_source',
      source_config: { deployment_type: 'dev' },
      source_revision_config: {},
      secrets: [],
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body.latest_revision_id).toBeNull();
    return created.body.id;
  }

  async function uploadUrl(deploymentId: string): Promise<{ url: string; objectPath: string; id: string }> {
    const response = await t.api.post(`/v2/deployments/${deploymentId}/upload-url`);
    expect(response.status).toBe(200);
    const issued = new URL(response.body.upload_url);
    expect(issued.origin).toBe('http://localhost'); // PUBLIC_URL of the in-process app
    const id = issued.pathname.split('/').at(-1)!;
    return { url: `${http.url}${issued.pathname}${issued.search}`, objectPath: response.body.object_path, id };
  }

  it('upload-url → PUT → PATCH builds a revision from the tarball; it reads back byte for byte', async () => {
    const id = await newDeployment();
    const tarball = await gzipTarball({ ...agentProject({ agent: './agent.py:graph', other: './other.py:g' }), 'src/other.py': 'g = None\n' });
    const target = await uploadUrl(id);
    const response = await put(target.url, [tarball]);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ object_path: target.objectPath, size: tarball.length });

    const stream = await t.services.uploads.open(id, target.objectPath);
    const back: Buffer[] = [];
    for await (const chunk of stream!) back.push(chunk as Buffer);
    expect(createHash('sha256').update(Buffer.concat(back)).digest('hex')).toBe(createHash('sha256').update(tarball).digest('hex'));

    const patched = await t.api.patch(`/v2/deployments/${id}`, {
      revision_source: 'internal_source',
      source_revision_config: { source_tarball_path: target.objectPath, langgraph_config_path: 'langgraph.json' },
      source_config: { install_command: null, build_command: null },
      secrets: [],
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.source_revision_config).toMatchObject({ source_tarball_path: target.objectPath, langgraph_config_path: 'langgraph.json' });
    const revision = await revisionReaches(t.api, id, patched.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED', 'DEPLOY_FAILED']);
    expect(revision.status).toBe('DEPLOYED');
    const build = await t.api.get(`/v2/deployments/${id}/revisions/${revision.id}/logs?type=build`);
    const text = build.body.logs.map((l: { message: string }) => l.message).join('\n');
    expect(text).toContain('would use 4 files');
    expect(text).toContain('graph config langgraph.json found (graphs: agent, other)');
  });

  it('a PATCH naming an object not uploaded for this deployment is 400 and creates nothing', async () => {
    const a = await newDeployment();
    const b = await newDeployment();
    const target = await uploadUrl(a);
    expect((await put(target.url, [await gzipTarball(agentProject())])).status).toBe(200);
    const cross = await t.api.patch(`/v2/deployments/${b}`, {
      revision_source: 'internal_source',
      source_revision_config: { source_tarball_path: target.objectPath },
    });
    expect(cross.status).toBe(400);
    const invented = await t.api.patch(`/v2/deployments/${a}`, { source_revision_config: { source_tarball_path: `deployments/${a}/uploads/nothing.tar.gz` } });
    expect(invented.status).toBe(400);
    const issuedOnly = await uploadUrl(a);
    expect((await t.api.patch(`/v2/deployments/${a}`, { source_revision_config: { source_tarball_path: issuedOnly.objectPath } })).status).toBe(400);
    expect((await t.api.get(`/v2/deployments/${b}/revisions`)).body.resources).toEqual([]);
    expect((await t.api.get(`/v2/deployments/${a}/revisions`)).body.resources).toEqual([]);
  });

  it('a wrong signature, a changed expiry, an unknown id: 4xx, nothing stored, the URL still usable', async () => {
    const id = await newDeployment();
    const target = await uploadUrl(id);
    const tarball = await gzipTarball(agentProject());
    const url = new URL(target.url);
    const forged = new URL(url);
    forged.searchParams.set(
      'signature',
      url.searchParams.get('signature')!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')),
    );
    expect((await put(forged.toString(), [tarball])).status).toBe(403);
    const later = new URL(url);
    later.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 3_600_000));
    expect((await put(later.toString(), [tarball])).status).toBe(403);
    const unsigned = new URL(url);
    unsigned.searchParams.delete('signature');
    expect((await put(unsigned.toString(), [tarball])).status).toBe(403);
    const otherId = new URL(url);
    otherId.pathname = otherId.pathname.replace(target.id, crypto.randomUUID());
    expect((await put(otherId.toString(), [tarball])).status).toBe(403);
    expect((await chunkCount(target.id)).n).toBe(0);
    expect(await state(target.id)).toBe('issued');
    expect((await put(target.url, [tarball])).status).toBe(200);
  });

  it('a refused PUT leaves its connection usable: the unread body is drained, not left holding it', async () => {
    const id = await newDeployment();
    const target = await uploadUrl(id);
    const forged = new URL(target.url);
    forged.searchParams.set('signature', 'x');
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const send = (method: string, url: string, body?: Buffer) =>
        new Promise<number>((resolve, reject) => {
          const u = new URL(url);
          const req = httpRequest({ host: u.hostname, port: u.port, method, path: u.pathname + u.search, agent }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          });
          req.on('error', reject);
          req.end(body);
        });
      const sockets = new Set<unknown>();
      agent.on('free', (socket) => sockets.add(socket));
      expect(await send('PUT', forged.toString(), Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.alloc(1_100_000, 1)]))).toBe(403);
      // The same kept-alive connection carries the next request (maxSockets: 1).
      expect(await send('GET', `${http.url}/healthz`)).toBe(200);
      expect(await send('PUT', target.url, await gzipTarball(agentProject()))).toBe(200);
      expect(sockets.size).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  it('a reused URL is refused (409) and keeps the first upload', async () => {
    const id = await newDeployment();
    const target = await uploadUrl(id);
    const first = await gzipTarball(agentProject());
    expect((await put(target.url, [first])).status).toBe(200);
    const second = await put(target.url, [await gzipTarball({ 'x.txt': 'other' })]);
    expect(second.status).toBe(409);
    expect(await t.sql.prepare('SELECT size FROM uploads WHERE id = ?').get(target.id)).toEqual({ size: first.length });
  });

  it('a body that is not gzip: 400 and nothing stored', async () => {
    const id = await newDeployment();
    const target = await uploadUrl(id);
    const notGzip = await put(target.url, [Buffer.from('PK\u0003\u0004 this is a zip, not a gzip tarball')]);
    expect(notGzip.status).toBe(400);
    expect(notGzip.body.detail).toContain('not gzip');
    const almost = await put(target.url, [Buffer.from([0x1f]), Buffer.from('not the second magic byte')]);
    expect(almost.status).toBe(400);
    expect((await put(target.url, [])).status).toBe(400);
    expect((await chunkCount(target.id)).n).toBe(0);
    expect(await state(target.id)).toBe('issued');
  });

  it('over the cap, declared or streamed: 413 and nothing stored', async () => {
    const id = await newDeployment();
    const target = await uploadUrl(id);
    const declared = await put(target.url, [Buffer.from([0x1f, 0x8b])], { declared: cap + 1 }).catch((error: NodeJS.ErrnoException) => ({
      status: -1,
      body: error.code,
    }));
    expect(declared.status).toBe(413);
    expect((await chunkCount(target.id)).n).toBe(0);

    const megabyte = Buffer.alloc(1024 * 1024, 7);
    const head = Buffer.concat([Buffer.from([0x1f, 0x8b]), megabyte]);
    const streamed = await put(target.url, [head, megabyte, megabyte, megabyte]).catch((error: NodeJS.ErrnoException) => ({ status: -1, body: error.code }));
    expect(streamed.status).toBe(413);
    await eventually(async () => ((await state(target.id)) === 'issued' ? true : undefined));
    expect((await chunkCount(target.id)).n).toBe(0);
  });

  it('the body is written in ≤ 1 MiB chunk rows while it streams in, not held whole', async () => {
    const id = await newDeployment();
    const target = await uploadUrl(id);
    const megabyte = Buffer.alloc(1024 * 1024, 1);
    const parts = [Buffer.concat([Buffer.from([0x1f, 0x8b]), megabyte]), megabyte, Buffer.alloc(10)];
    const seenWhileOpen: number[] = [];
    const response = await put(target.url, parts, {
      between: async (index) => {
        if (index !== 1) return;
        // 2 MiB + 2 bytes sent, the request still open: two full chunks must already be rows.
        await eventually(async () => ((await chunkCount(target.id)).n >= 2 ? true : undefined), 5000);
        seenWhileOpen.push((await chunkCount(target.id)).n);
        expect(await state(target.id)).toBe('receiving');
      },
    });
    expect(seenWhileOpen[0]).toBeGreaterThanOrEqual(2);
    // Not a real gzip stream, but the magic bytes are right: it is stored; a build would fail on it.
    expect(response.status).toBe(200);
    const sizes = (await t.sql.prepare('SELECT length(data) AS n FROM upload_chunks WHERE upload_id = ? ORDER BY seq').all(target.id)) as Array<{ n: number }>;
    expect(sizes.map((s) => s.n)).toEqual([1024 * 1024, 1024 * 1024, 12]);
    const patched = await t.api.patch(`/v2/deployments/${id}`, { source_revision_config: { source_tarball_path: target.objectPath } });
    const revision = await revisionReaches(t.api, id, patched.body.latest_revision_id, ['DEPLOYED', 'BUILD_FAILED']);
    expect(revision.status).toBe('BUILD_FAILED');
    expect(revision.status_message).toContain('could not be read as a gzip tarball');
  });

  it("a deleted deployment's tarballs are removed", async () => {
    const id = await newDeployment();
    const target = await uploadUrl(id);
    expect((await put(target.url, [await gzipTarball(agentProject())])).status).toBe(200);
    expect((await chunkCount(target.id)).n).toBe(1);
    expect((await t.api.delete(`/v2/deployments/${id}`)).status).toBe(204);
    await eventually(async () => ((await t.api.get(`/v2/deployments/${id}`)).status === 404 ? true : undefined));
    expect((await chunkCount(target.id)).n).toBe(0);
    expect(await state(target.id)).toBeUndefined();
    expect((await put(target.url, [await gzipTarball(agentProject())])).status).toBe(404);
  });
});

describe('upload URLs expire', () => {
  it('a URL used after its time is refused with 403 and stores nothing', async () => {
    const t = await inProcessApp({ env: { UPLOAD_URL_TTL_SECONDS: '1' } });
    const http = await served(t);
    try {
      const created = await t.api.post('/v2/deployments', { name: uniqueName(), source: 'internal_source' });
      const issued = new URL((await t.api.post(`/v2/deployments/${created.body.id}/upload-url`)).body.upload_url);
      expect(Number(issued.searchParams.get('expires')) - Date.now()).toBeLessThanOrEqual(1000);
      await new Promise((r) => setTimeout(r, 1100));
      const response = await put(`${http.url}${issued.pathname}${issued.search}`, [await gzipTarball(agentProject())]);
      expect(response.status).toBe(403);
      expect(response.body.detail).toContain('expired');
      expect(((await t.sql.prepare('SELECT count(*) AS n FROM upload_chunks').get()) as { n: number }).n).toBe(0);
    } finally {
      await http.close();
      t.close();
    }
  });

  it('tarballs no revision names are dropped one URL lifetime after they were uploaded; named ones stay', async () => {
    const t = await inProcessApp({ stageMs: 5, env: { UPLOAD_URL_TTL_SECONDS: '1' } });
    const http = await served(t);
    try {
      const id = (await t.api.post('/v2/deployments', { name: uniqueName(), source: 'internal_source' })).body.id;
      const upload = async () => {
        const issued = new URL((await t.api.post(`/v2/deployments/${id}/upload-url`)).body.upload_url);
        const response = await put(`${http.url}${issued.pathname}${issued.search}`, [await gzipTarball(agentProject())]);
        expect(response.status).toBe(200);
        return response.body.object_path as string;
      };
      const unused = await upload();
      const named = await upload();
      expect((await t.api.patch(`/v2/deployments/${id}`, { source_revision_config: { source_tarball_path: named } })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1100));
      await t.api.post(`/v2/deployments/${id}/upload-url`);
      const kept = (
        (await t.sql.prepare("SELECT object_path FROM uploads WHERE deployment_id = ? AND state = 'complete'").all(id)) as Array<{ object_path: string }>
      ).map((r) => r.object_path);
      expect(kept).toEqual([named]);
      expect(unused).not.toBe(named);
      expect(((await t.sql.prepare('SELECT count(*) AS n FROM upload_chunks').get()) as { n: number }).n).toBe(1);
    } finally {
      await http.close();
      t.close();
    }
  });
});

describe('a crash in the middle of a PUT', () => {
  it("leaves nothing stored: the next start drops the chunks (on PostgreSQL, once the dead process's lease has passed), and the URL can be used again", async () => {
    // On PostgreSQL another live process may be receiving an upload, so a start releases only
    // uploads whose receiver's lease has passed: a short lease keeps this test short.
    const server = await startServerProcess({ PIPELINE_LEASE_MS: '1000' });
    let restarted: Awaited<ReturnType<typeof startServerProcess>> | undefined;
    try {
      const api = (await import('../helpers/api.ts')).apiClient(server.url, server.apiKey);
      const id = (await api.post('/v2/deployments', { name: uniqueName(), source: 'internal_source' })).body.id;
      const { upload_url: uploadUrl, object_path: objectPath } = (await api.post(`/v2/deployments/${id}/upload-url`)).body;
      const uploadId = new URL(uploadUrl).pathname.split('/').at(-1)!;
      const db = openRawSql(server.databaseUrl, { readonly: true });
      const chunks = async () => ((await db.prepare('SELECT count(*) AS n FROM upload_chunks WHERE upload_id = ?').get(uploadId)) as { n: number }).n;
      const megabyte = Buffer.alloc(1024 * 1024, 3);
      const cut = put(
        `${server.url}${new URL(uploadUrl).pathname}${new URL(uploadUrl).search}`,
        [Buffer.concat([Buffer.from([0x1f, 0x8b]), megabyte]), megabyte, megabyte],
        {
          between: async (index) => {
            if (index !== 1) return;
            await eventually(async () => ((await chunks()) >= 2 ? true : undefined), 5000);
            await server.kill('SIGKILL'); // the crash, while the body is still arriving
          },
        },
      ).catch(() => null);
      await cut;
      expect(await chunks()).toBeGreaterThanOrEqual(2);
      await db.close();
      restarted = await server.restart();
      const after = openRawSql(server.databaseUrl, { readonly: true });
      await eventually(
        async () => ((await after.prepare('SELECT state FROM uploads WHERE id = ?').get(uploadId)) as { state: string }).state === 'issued' || undefined,
        10_000,
      );
      expect(await after.prepare('SELECT count(*) AS n FROM upload_chunks WHERE upload_id = ?').get(uploadId)).toEqual({ n: 0 });
      await after.close();
      const again = await put(`${restarted.url}${new URL(uploadUrl).pathname}${new URL(uploadUrl).search}`, [await gzipTarball(agentProject())]);
      expect(again).toMatchObject({ status: 200, body: { object_path: objectPath } });
    } finally {
      await restarted?.kill();
      await server.kill();
    }
  });
});
