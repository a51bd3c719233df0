/**
 * Upload memory: streams one source tarball of SIZE_MIB (default 200, the cap) to a signed upload
 * URL of a real server on loopback and samples the server's resident memory (/proc/<pid>/status)
 * every 20 ms while it arrives. The body is the gzip magic bytes and random data (the upload path
 * checks only the magic bytes; nothing is built here). Prints the idle RSS, the peak during the
 * upload, the throughput, and the chunk rows the store holds afterwards.
 *
 *   node bench/upload-memory.ts            # SIZE_MIB=200
 */
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { apiClient } from '../test/helpers/api.ts';
import { removeTempDirs, rssBytes, sleep, startChild, tempDir } from './lib/processes.ts';

const sizeMiB = Number(process.env.SIZE_MIB ?? 200);
const apiKey = `bench-${randomBytes(16).toString('hex')}`; // the server refuses a bootstrap key under 24 characters
const databasePath = join(tempDir(), 'upload.db');
const server = await startChild('server/main.ts', {
  DATABASE_URL: databasePath,
  BOOTSTRAP_API_KEY: apiKey,
  LOG_LEVEL: 'info',
  UPLOAD_MAX_BYTES: String(sizeMiB * 1024 * 1024 + 2),
});
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
try {
  const api = apiClient(server.url, apiKey);
  const created = await api.post('/v2/deployments', { name: 'upload-bench', source: 'internal_source' });
  const { upload_url: uploadUrl } = (await api.post(`/v2/deployments/${created.body.id}/upload-url`)).body as { upload_url: string };
  await sleep(1000);
  const idle = rssBytes(server.pid);
  let peak = idle;
  const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(server.pid))), 20);

  const block = randomBytes(64 * 1024);
  const total = sizeMiB * 1024 * 1024;
  const started = performance.now();
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
        if (!req.write(block)) await new Promise((r) => req.once('drain', r));
      }
      req.end();
    })();
  });
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  const db = new Database(databasePath, { readonly: true });
  const chunks = db.prepare('SELECT count(*) AS n, max(length(data)) AS largest FROM upload_chunks').get() as { n: number; largest: number };
  db.close();
  console.log(`upload of ${mib(total)}: HTTP ${status} in ${seconds.toFixed(2)} s (${(sizeMiB / seconds).toFixed(0)} MiB/s)`);
  console.log(`server RSS: idle ${mib(idle)}, peak during upload ${mib(peak)} (+${mib(peak - idle)})`);
  console.log(`stored as ${chunks.n} chunk rows, largest ${mib(chunks.largest)}`);
} finally {
  await server.stop();
  removeTempDirs();
}
