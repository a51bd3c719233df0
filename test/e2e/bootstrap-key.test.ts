import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { silentLogger } from '../../server/logger.ts';
import { type RunningServer, startServer } from '../../server/server.ts';
import { testBackendKind, testDatabaseUrl } from '../helpers/backends.ts';

/**
 * The organization's first key at start (server/server.ts): generated and shown once on an empty
 * database when BOOTSTRAP_API_KEY is not set, never again; with BOOTSTRAP_API_KEY, that key, at
 * every start. Real servers on loopback, on this suite's backend.
 */
describe('the bootstrap key at start', () => {
  const encryptionKey = randomBytes(32).toString('base64');
  const configFor = (databaseUrl: string, env: Record<string, string> = {}) =>
    loadConfig({ DATABASE_URL: databaseUrl, PORT: '0', LOG_LEVEL: 'silent', ENCRYPTION_KEY: encryptionKey, ...env });
  const listStatus = async (server: RunningServer, key: string) =>
    (await fetch(`http://127.0.0.1:${server.port}/v2/deployments`, { headers: { 'x-api-key': key } })).status;
  const newDatabase = () => testDatabaseUrl(testBackendKind(), join(mkdtempSync(join(tmpdir(), 'cp-bootstrap-')), 'control-plane.db'));

  it('an empty database without BOOTSTRAP_API_KEY: a key is generated, shown once, and works; the next start shows none', async () => {
    const url = await newDatabase();
    const printed: string[] = [];
    let server = await startServer(configFor(url), { log: silentLogger, print: (text) => printed.push(text) });
    try {
      expect(printed).toHaveLength(1);
      const key = /^ {4}(\S+)$/m.exec(printed[0]!)![1]!;
      expect(await listStatus(server, key)).toBe(200);
      await server.close();
      server = await startServer(configFor(url), { log: silentLogger, print: (text) => printed.push(text) });
      expect(printed).toHaveLength(1);
      expect(await listStatus(server, key)).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('with BOOTSTRAP_API_KEY: that key works from the first start on, nothing is shown, and a second start keeps it', async () => {
    const url = await newDatabase();
    const key = `bootstrap-${randomBytes(16).toString('hex')}`;
    const printed: string[] = [];
    let server = await startServer(configFor(url, { BOOTSTRAP_API_KEY: key }), { log: silentLogger, print: (text) => printed.push(text) });
    try {
      expect(await listStatus(server, key)).toBe(200);
      expect(await listStatus(server, `${key}-not`)).toBe(401);
      await server.close();
      server = await startServer(configFor(url, { BOOTSTRAP_API_KEY: key }), { log: silentLogger, print: (text) => printed.push(text) });
      expect(await listStatus(server, key)).toBe(200);
      expect(printed).toEqual([]);
    } finally {
      await server.close();
    }
  });
});
