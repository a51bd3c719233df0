import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { dockerBody, revisionReaches, uniqueName, workspaceFixtures } from '../helpers/fixtures.ts';
import { inProcessApp } from '../helpers/in-process.ts';
import { ROOT } from '../helpers/listening-child.ts';

type App = Awaited<ReturnType<typeof inProcessApp>>;

/**
 * A full disk, made for real: the live connection's `max_page_count` is lowered to the pages the
 * file has (SQLite then refuses to grow it, with SQLITE_FULL, as on a full disk), and the space
 * left in the log table's last page is used up with filler lines of a revision kept for that
 * purpose. Writes that need a new page (every stage change writes a log line) now fail.
 */
function fillTheDisk(db: Database.Database, fillerRevisionId: string): void {
  db.pragma('max_page_count = 1'); // clamped to the current page count
  const insert = db.prepare(
    "INSERT INTO revision_logs (revision_id, type, level, message, timestamp) VALUES (?, 'deploy', 'info', ?, '2026-01-01T00:00:00.000Z')",
  );
  for (const size of [2000, 200, 20, 1]) {
    for (;;) {
      try {
        insert.run(fillerRevisionId, 'x'.repeat(size));
      } catch (error) {
        expect((error as { code: string }).code).toBe('SQLITE_FULL');
        break;
      }
    }
  }
}

function freeTheDisk(db: Database.Database): void {
  db.pragma('max_page_count = 1073741823');
}

describe('storage failures', () => {
  let t: App | undefined;
  afterEach(() => t?.close());

  it('a full disk during a stage: writes answer 503 naming the problem, /readyz fails; once space returns the revision and the queued one finish, no restart', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'cp-full-')), 'control-plane.db');
    t = await inProcessApp({ stageMs: 300, path });
    const app = t;
    const fx = await workspaceFixtures(app.api);
    const filler = await app.api.post('/v2/deployments', dockerBody(uniqueName('filler'), fx.listenerId));
    await revisionReaches(app.api, filler.body.id, filler.body.latest_revision_id, ['DEPLOYED']);

    const created = await app.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId));
    const id = created.body.id;
    const first = created.body.latest_revision_id;
    await revisionReaches(app.api, id, first, ['DEPLOYING']);
    const second = (await app.api.patch(`/v2/deployments/${id}`, { source_revision_config: { image_uri: 'img:2' } })).body.latest_revision_id;
    expect((await app.api.get('/readyz')).status).toBe(200);

    fillTheDisk(app.store.db, filler.body.latest_revision_id);
    // Several stage lengths pass while the disk is full: the revision cannot move on.
    await new Promise((resolve) => setTimeout(resolve, 1200));
    expect((await app.api.get(`/v2/deployments/${id}/revisions/${first}`)).body.status).toBe('DEPLOYING');
    expect((await app.api.get(`/v2/deployments/${id}/revisions/${second}`)).body.status).toBe('QUEUED');

    const refused = await app.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId, { secrets: [{ name: 'BIG', value: 'v'.repeat(20_000) }] }));
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({ detail: 'The database is out of disk space.' });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const notReady = await app.api.get('/readyz');
    expect(notReady.status).toBe(503);
    expect(notReady.body.detail).toBe('The database is out of disk space.');
    expect(notReady.headers.get('retry-after')).not.toBeNull();
    // Nothing of the refused create was kept.
    expect((await app.api.get('/v2/deployments?limit=100')).body.resources).toHaveLength(2);

    freeTheDisk(app.store.db);
    await revisionReaches(app.api, id, first, ['DEPLOYED']);
    await revisionReaches(app.api, id, second, ['DEPLOYED']);
    await eventually(async () => ((await app.api.get('/readyz')).status === 200 ? true : undefined), 5000);
    expect((await app.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId))).status).toBe(201);
  });

  it('a read-only database: writes answer 503 naming the problem, reads still work, /readyz fails until it is writable', async () => {
    t = await inProcessApp({ stageMs: 10 });
    const app = t;
    const fx = await workspaceFixtures(app.api);
    // SQLite's own read-only switch on the live connection: every write fails with SQLITE_READONLY.
    app.store.db.pragma('query_only = ON');
    const refused = await app.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId));
    expect(refused.status).toBe(503);
    expect(refused.body.detail).toMatch(/^The database is read-only/);
    expect((await app.api.get('/v2/deployments')).status).toBe(200);
    expect((await app.api.get('/readyz')).status).toBe(503);
    app.store.db.pragma('query_only = OFF');
    await eventually(async () => ((await app.api.get('/readyz')).status === 200 ? true : undefined), 5000);
  });

  it('a database locked by another process past the busy timeout: writes answer 503 saying so, then work again', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'cp-busy-')), 'control-plane.db');
    t = await inProcessApp({ stageMs: 10, path });
    const app = t;
    const fx = await workspaceFixtures(app.api);
    // Another process's connection (here: a second connection) holds the write lock.
    const other = new Database(path);
    other.prepare('BEGIN IMMEDIATE').run();
    try {
      app.store.db.pragma('busy_timeout = 300');
      const refused = await app.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId));
      expect(refused.status).toBe(503);
      expect(refused.body.detail).toMatch(/locked by another process/);
    } finally {
      other.prepare('ROLLBACK').run();
      other.close();
    }
    expect((await app.api.post('/v2/deployments', dockerBody(uniqueName(), fx.listenerId))).status).toBe(201);
  });

  describe('a database path that cannot be used ends the start with one sentence naming it (no stack)', () => {
    function start(databasePath: string) {
      return spawnSync(process.execPath, [join(ROOT, 'server/main.ts')], {
        cwd: ROOT,
        env: { PATH: process.env.PATH ?? '', PORT: '0', DATABASE_URL: databasePath, BOOTSTRAP_API_KEY: `test-key-${crypto.randomUUID()}`, LOG_LEVEL: 'info' },
        encoding: 'utf8',
        timeout: 20_000,
      });
    }

    it('a directory that cannot be created (a file is in the way)', () => {
      const dir = mkdtempSync(join(tmpdir(), 'cp-bad-path-'));
      writeFileSync(join(dir, 'not-a-dir'), 'x');
      const path = join(dir, 'not-a-dir', 'data', 'control-plane.db');
      const result = start(path);
      expect(result.status).not.toBe(0);
      const lines = result.stderr
        .trim()
        .split('\n')
        .filter((line) => !line.startsWith('{')); // JSON log lines aside
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain(path);
      expect(lines[0]).toMatch(/not a directory/);
      expect(result.stderr).not.toMatch(/\n\s+at /);
    });

    it('a path that is a directory', () => {
      const dir = mkdtempSync(join(tmpdir(), 'cp-dir-path-'));
      const result = start(dir);
      expect(result.status).not.toBe(0);
      expect(result.stderr.trim()).toBe(`Cannot open the database at ${dir}: the path is a directory (set DATABASE_URL to a writable file path).`);
      expect(existsSync(`${dir}.key`)).toBe(false);
      expect(result.stderr).not.toMatch(/\n\s+at /);
    });
  });
});
