import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../server/config.ts';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import { asStorageUnavailable } from '../../server/domain/storage-unavailable.ts';
import { silentLogger } from '../../server/logger.ts';
import { startServer } from '../../server/server.ts';
import { MIGRATIONS as PG_MIGRATIONS } from '../../server/store/migrations/index.ts';
import { openStore } from '../../server/store/open.ts';
import { createTestDatabase } from '../helpers/postgres.ts';
import { openRawSql } from '../helpers/raw-sql.ts';

/** Opening the PostgreSQL store on the run's real server: migrations, refusals at start, storage faults. */
describe('the PostgreSQL store at start', () => {
  const box = () => new SecretBox(randomBytes(32));

  it('the server refuses to start on PostgreSQL without ENCRYPTION_KEY (no folder to keep a generated one in), and starts with one', async () => {
    const url = await createTestDatabase(inject('postgresAdminUrl'));
    const config = (env: Record<string, string>) =>
      loadConfig({ DATABASE_URL: url, PORT: '0', LOG_LEVEL: 'silent', BOOTSTRAP_API_KEY: `key-${crypto.randomUUID()}`, ...env });
    await expect(startServer(config({}), { log: silentLogger, print: () => {} })).rejects.toMatchObject({
      name: 'StartupError',
      message: 'ENCRYPTION_KEY must be set when DATABASE_URL names a PostgreSQL server (openssl rand -base64 32).',
    });
    const server = await startServer(config({ ENCRYPTION_KEY: randomBytes(32).toString('base64') }), { log: silentLogger, print: () => {} });
    try {
      const answer = await fetch(`http://127.0.0.1:${server.port}/readyz`);
      expect(answer.status).toBe(200);
    } finally {
      await server.close();
    }
  });

  it('two processes starting together on an empty database migrate it once', async () => {
    const url = await createTestDatabase(inject('postgresAdminUrl'));
    const backends = await Promise.all(Array.from({ length: 3 }, () => openStore(url, { secretBox: box() })));
    const raw = openRawSql(url);
    try {
      const applied = await raw.all<{ version: number }>('SELECT version FROM schema_migrations WHERE version > 0 ORDER BY version');
      expect(applied.map((r) => r.version)).toEqual(PG_MIGRATIONS.map((m) => m.version));
      // And each of them works on it.
      for (const backend of backends) expect(await backend.core.ping()).toBe(true);
    } finally {
      await raw.close();
      await Promise.all(backends.map((b) => b.close()));
    }
  });

  it('a server that refuses connections is one sentence naming the URL without its password', async () => {
    // A port that was free a moment ago: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    const error = await openStore(`postgres://someone:hunter2@127.0.0.1:${port}/nothing`, { secretBox: box() }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'StartupError' });
    expect((error as Error).message).toBe(
      `Cannot open the PostgreSQL database at postgres://someone:***@127.0.0.1:${port}/nothing: the database server refused the connection (check DATABASE_URL).`,
    );
  });

  it('a wrong password and a missing database are said as such', async () => {
    const admin = new URL(inject('postgresAdminUrl'));
    const wrong = new URL(admin);
    wrong.password = 'not-the-password';
    const refused = await openStore(wrong.toString(), { secretBox: box() }).catch((e: unknown) => e);
    expect((refused as Error).message).toMatch(/: the password was refused \(check DATABASE_URL\)\.$/);
    expect((refused as Error).message).not.toContain('not-the-password');
    const missing = new URL(admin);
    missing.pathname = '/no_such_database';
    const absent = await openStore(missing.toString(), { secretBox: box() }).catch((e: unknown) => e);
    expect((absent as Error).message).toMatch(/: the database does not exist \(check DATABASE_URL\)\.$/);
  });

  it('a database that turns read-only: requests get the storage sentence (503), a new start is refused in one sentence', async () => {
    const url = await createTestDatabase(inject('postgresAdminUrl'));
    const backend = await openStore(url, { secretBox: box() });
    const admin = openRawSql(inject('postgresAdminUrl'));
    try {
      const name = new URL(url).pathname.slice(1);
      await admin.run(`ALTER DATABASE ${name} SET default_transaction_read_only = on`);
      // The setting applies to new sessions: end the store's pooled ones, so it reconnects.
      await admin.run('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ? AND pid <> pg_backend_pid()', name);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const error = await backend.probeWrite().catch((e: unknown) => e);
      expect(asStorageUnavailable(error)?.message).toBe('The database is read-only (a standby, or set read-only).');
      const write = await backend.core
        .createWorkspace({
          id: crypto.randomUUID(),
          organization_id: crypto.randomUUID(),
          name: 'x',
          created_at: new Date().toISOString(),
          default_listener_id: null,
        })
        .catch((e: unknown) => e);
      expect(asStorageUnavailable(write)?.message).toBe('The database is read-only (a standby, or set read-only).');
      // Reads still work.
      expect(await backend.core.ping()).toBe(true);
      const again = await openStore(url, { secretBox: box() }).catch((e: unknown) => e);
      expect((again as Error).message).toMatch(
        /^Cannot open the PostgreSQL database at .*: the database is read-only \(a standby, or set read-only\) \(check DATABASE_URL\)\.$/,
      );
    } finally {
      await admin.close();
      await backend.close();
    }
  });
});
