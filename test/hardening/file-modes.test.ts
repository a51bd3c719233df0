import { chmodSync, mkdtempSync, readdirSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markBuilt, recordServer, stateDirOf } from '../../agent/build-records.ts';
import { downloadTarball } from '../../agent/tarball.ts';
import { loadConfig } from '../../server/config.ts';
import { createLogger } from '../../server/logger.ts';
import { startServer } from '../../server/server.ts';
import { apiClient } from '../helpers/api.ts';
import { uniqueName } from '../helpers/fixtures.ts';
import { agentProject, gzipTarball } from '../helpers/tarball.ts';

/**
 * What the server and the agent keep on disk is their owner's only, whatever the umask: the
 * database, its WAL and shared-memory files (every record and the uploaded tarballs live there) and
 * the key file 0600 in a 0700 folder; looser modes found at start are fixed with a warning. The
 * server runs in this test's own process (vitest runs each file in a process of its own) with the
 * most permissive umask, 000, under which a plain `open` makes files 0666.
 */

const mode = (path: string) => `0${(statSync(path).mode & 0o777).toString(8)}`;

describe('file modes', () => {
  let previousUmask: number;
  let root: string;
  beforeAll(() => {
    previousUmask = process.umask(0o000);
    root = mkdtempSync(join(tmpdir(), 'cp-modes-'));
  });
  afterAll(() => {
    process.umask(previousUmask);
  });

  it('creates the database, its WAL and shared-memory files, the key file and its folder owner-only, and fixes looser modes at the next start', async () => {
    const dir = join(root, 'data', 'nested');
    const database = join(dir, 'control-plane.db');
    const lines: string[] = [];
    const log = createLogger('warn', (line) => lines.push(line));
    const key = `key-${crypto.randomUUID()}`;
    const config = loadConfig({
      DATABASE_URL: database,
      PORT: '0',
      LOG_LEVEL: 'silent',
      BOOTSTRAP_API_KEY: key,
      SANDBOX_STAGE_MS: '10',
      RECONCILE_INTERVAL_MS: '0',
    });

    let server = await startServer(config, { log, print: () => {} });
    try {
      // Writes through the whole path, an uploaded tarball included (it is stored in the database).
      const api = apiClient(`http://127.0.0.1:${server.port}`, key);
      const created = await api.post('/v2/deployments', { name: uniqueName('modes'), source: 'internal_source' });
      expect(created.status).toBe(201);
      const url = await api.post(`/v2/deployments/${created.body.id}/upload-url`);
      const put = await fetch(url.body.upload_url, { method: 'PUT', headers: { 'content-type': 'application/gzip' }, body: await gzipTarball(agentProject()) });
      expect(put.status).toBeLessThan(300);
      const files = readdirSync(dir).sort();
      expect(files).toEqual(expect.arrayContaining(['control-plane.db', 'control-plane.db-wal', 'control-plane.db-shm', 'control-plane.db.key']));
      for (const file of files) expect(`${file} ${mode(join(dir, file))}`).toBe(`${file} 0600`);
      expect(mode(dir)).toBe('0700');
      expect(mode(join(root, 'data'))).toBe('0700');
    } finally {
      await server.close();
    }
    expect(lines.join('\n')).not.toContain('readable by other users');

    // An earlier run, a copy or a restore left them readable by everyone: the next start fixes them and says so.
    const loosened = readdirSync(dir);
    expect(loosened).toEqual(expect.arrayContaining(['control-plane.db', 'control-plane.db.key']));
    for (const file of loosened) chmodSync(join(dir, file), 0o644);
    server = await startServer(config, { log, print: () => {} });
    try {
      for (const file of readdirSync(dir)) expect(`${file} ${mode(join(dir, file))}`).toBe(`${file} 0600`);
      const warned = lines
        .map((line) => JSON.parse(line) as { msg: string; path?: string; mode?: string })
        .filter((line) => line.msg.includes('readable by other users'));
      expect(warned.map((line) => `${line.path} ${line.mode}`).sort()).toEqual(loosened.map((file) => `${join(dir, file)} 0644`).sort());
    } finally {
      await server.close();
    }
  });

  it('keeps the agent’s records about its builds, and the tarballs it downloads, owner-only', async () => {
    const buildDir = join(root, 'agent-work', 'deployment', 'revision');
    markBuilt(buildDir, { sha: null, graph_config_path: 'langgraph.json' });
    recordServer(buildDir, process.pid);
    expect(mode(stateDirOf(buildDir))).toBe('0700');
    for (const file of readdirSync(stateDirOf(buildDir))) expect(`${file} ${mode(join(stateDirOf(buildDir), file))}`).toBe(`${file} 0600`);

    // A tenant's uploaded source, as the agent fetches it from the control plane (a loopback stand-in serving bytes).
    const server = createServer((_request, response) => response.end(Buffer.from([0x1f, 0x8b, 1, 2, 3])));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const file = join(root, 'agent-work', 'downloads', 'source.tar.gz');
      expect(await downloadTarball(`http://127.0.0.1:${(server.address() as AddressInfo).port}/source`, 'lat_test', file)).toBe(5);
      expect(mode(file)).toBe('0600');
      expect(mode(join(root, 'agent-work', 'downloads'))).toBe('0700');
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
