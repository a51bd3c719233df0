/**
 * Agent source fetch memory: uploads one source tarball of SIZE_MIB (default 200, the cap) to a
 * real server on loopback, deploys it on a `local` listener, claims the work with the listener's
 * token as an agent would, and reads the tarball back from the work item's signed URL twice: at
 * full speed, then as a slow reader (paused 3 s after every 50 MiB). The server's resident memory
 * (/proc/<pid>/status) is sampled every 20 ms. The body is the gzip magic bytes and random data
 * (nothing is unpacked here; the agent's unpacking is tested in test/agents/tarball.test.ts).
 *
 *   node bench/agent-source-memory.ts        # SIZE_MIB=200
 */
import { createHash, randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { join } from 'node:path';
import { apiClient } from '../test/helpers/api.ts';
import { removeTempDirs, rssBytes, sleep, startChild, tempDir } from './lib/processes.ts';

const sizeMiB = Number(process.env.SIZE_MIB ?? 200);
const apiKey = `bench-${randomBytes(16).toString('hex')}`;
const server = await startChild('server/main.ts', {
  DATABASE_URL: join(tempDir(), 'source.db'),
  BOOTSTRAP_API_KEY: apiKey,
  LOG_LEVEL: 'info',
  UPLOAD_MAX_BYTES: String(sizeMiB * 1024 * 1024 + 2),
});
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** GETs `path` with the token; `pauseEvery` bytes, stops reading for `pauseMs` (TCP backpressure reaches the server). */
function read(path: string, token: string, pauseEvery = 0, pauseMs = 0): Promise<{ status: number; bytes: number; sha: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: server.port, path, headers: { authorization: `Bearer ${token}` } }, (res) => {
      const hash = createHash('sha256');
      let bytes = 0;
      let nextPause = pauseEvery;
      res.on('data', (chunk: Buffer) => {
        hash.update(chunk);
        bytes += chunk.length;
        if (pauseEvery && bytes >= nextPause) {
          nextPause += pauseEvery;
          res.pause();
          setTimeout(() => res.resume(), pauseMs);
        }
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, sha: hash.digest('hex') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

try {
  const api = apiClient(server.url, apiKey);
  const workspaceId = (await api.get('/v1/workspaces')).body[0].id as string;
  const listener = await api.post('/v2/listeners', { compute_type: 'local', compute_id: 'bench' });
  const token = (await api.post(`/v2/listeners/${listener.body.id}/tokens`)).body.token as string;
  await api.patch(`/v1/workspaces/${workspaceId}`, { default_listener_id: listener.body.id });
  const created = await api.post('/v2/deployments', { name: 'source-bench', source: 'internal_source' });
  const { upload_url: uploadUrl, object_path: objectPath } = (await api.post(`/v2/deployments/${created.body.id}/upload-url`)).body as {
    upload_url: string;
    object_path: string;
  };

  const block = randomBytes(64 * 1024);
  const total = sizeMiB * 1024 * 1024;
  const uploaded = createHash('sha256').update(Buffer.from([0x1f, 0x8b]));
  const status = await new Promise<number>((resolve, reject) => {
    const url = new URL(uploadUrl);
    const req = request(
      {
        host: '127.0.0.1',
        port: server.port,
        method: 'PUT',
        path: url.pathname + url.search,
        headers: { 'content-type': 'application/gzip', 'content-length': String(total + 2) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    void (async () => {
      req.write(Buffer.from([0x1f, 0x8b]));
      for (let sent = 0; sent < total; sent += block.length) {
        uploaded.update(block);
        if (!req.write(block)) await new Promise((r) => req.once('drain', r));
      }
      req.end();
    })();
  });
  if (status !== 200) throw new Error(`upload: HTTP ${status}`);
  const expected = uploaded.digest('hex');
  await api.patch(`/v2/deployments/${created.body.id}`, { revision_source: 'internal_source', source_revision_config: { source_tarball_path: objectPath } });

  const claim = await fetch(`${server.url}/v2/listeners/${listener.body.id}/agent/claim`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ agent_id: 'bench', wait_seconds: 10 }),
  });
  const work = ((await claim.json()) as { work: { revision: { source: { url: string } } } }).work;
  const source = new URL(work.revision.source.url);
  const path = source.pathname + source.search;

  for (const [label, pauseEvery, pauseMs] of [
    ['full speed', 0, 0],
    ['slow reader (3 s pause per 50 MiB)', 50 * 1024 * 1024, 3000],
  ] as const) {
    await sleep(1000);
    const idle = rssBytes(server.pid);
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(server.pid))), 20);
    const started = performance.now();
    const result = await read(path, token, pauseEvery, pauseMs);
    const seconds = (performance.now() - started) / 1000;
    clearInterval(sampler);
    if (result.status !== 200 || result.sha !== expected)
      throw new Error(`fetch: HTTP ${result.status}, ${result.bytes} bytes, digest ${result.sha === expected ? 'matches' : 'differs'}`);
    console.log(
      `fetch of ${mib(result.bytes)}, ${label}: ${seconds.toFixed(2)} s (${(result.bytes / 1024 / 1024 / seconds).toFixed(0)} MiB/s); server RSS idle ${mib(idle)}, peak ${mib(peak)} (+${mib(peak - idle)}); bytes identical`,
    );
  }
} finally {
  await server.stop();
  removeTempDirs();
}
