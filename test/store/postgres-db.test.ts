import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { migrate, numbered, PgDb } from '../../server/store/postgres/db.ts';
import { createTestDatabase } from '../helpers/postgres.ts';

/** The PostgreSQL store's transaction helper, on the run's real server. */
describe('PgDb', () => {
  let db: PgDb;
  beforeAll(async () => {
    db = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 4 });
    await migrate(db);
    await db.run("INSERT INTO organizations (id, name, created_at) VALUES ('a', 'a', 'now'), ('b', 'b', 'now')");
  });
  afterAll(async () => {
    await db?.close();
  });

  it('a statement PostgreSQL refuses leaves its connection in the pool: the next statement needs no new connection', async () => {
    const one = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 1 });
    try {
      const backend = async () => (await one.row<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!.pid;
      const before = await backend();
      let connects = 0;
      one.pool.on('connect', () => (connects += 1));
      const refusals: Array<[string, unknown[]]> = [
        ['SELECT * FROM no_such_table', []],
        ['SELECT 1 / 0', []],
        // PostgreSQL refuses a NUL in text (22021).
        ['SELECT CAST(? AS TEXT)', ['a\u0000b']],
      ];
      for (const [refused, params] of refusals) {
        await expect(one.rows(refused, params), refused).rejects.toThrow();
        expect(await backend(), refused).toBe(before);
      }
      // A unique violation outside a transaction (the store's single statements): the same.
      await one.run('CREATE TABLE once (id TEXT PRIMARY KEY)');
      await one.run("INSERT INTO once VALUES ('x')");
      await expect(one.run("INSERT INTO once VALUES ('x')")).rejects.toMatchObject({ code: '23505' });
      expect(await backend()).toBe(before);
      expect(connects).toBe(0);
    } finally {
      await one.close();
    }
  });

  it('numbers ? placeholders in order', () => {
    expect(numbered('SELECT * FROM t WHERE a = ? AND b IN (?, ?)')).toBe('SELECT * FROM t WHERE a = $1 AND b IN ($2, $3)');
  });

  it('a transaction PostgreSQL aborts to break a deadlock is run again, so both complete', async () => {
    // Two transactions lock the same two rows in opposite orders, each waiting for the other to hold its first.
    let held = 0;
    const bothHold = new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (held >= 2) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    const runs = { ab: 0, ba: 0 };
    const crossing = (first: string, second: string, key: 'ab' | 'ba') =>
      db.tx(async (c) => {
        runs[key]++;
        await db.run("UPDATE organizations SET created_at = 'x' WHERE id = ?", [first], c);
        if (runs[key] === 1) {
          held++;
          await bothHold;
        }
        await db.run("UPDATE organizations SET created_at = 'y' WHERE id = ?", [second], c);
        return key;
      });
    const results = await Promise.all([crossing('a', 'b', 'ab'), crossing('b', 'a', 'ba')]);
    expect(results.sort()).toEqual(['ab', 'ba']);
    // One of the two was chosen as the deadlock victim and ran again. Its second run may take the
    // first row back before the survivor (row locks are not granted in queue order) and deadlock
    // once more, so "again" can be twice on a busy machine: at least one rerun, at most the four
    // attempts PgDb.tx allows each.
    expect(runs.ab + runs.ba).toBeGreaterThanOrEqual(3);
    expect(Math.max(runs.ab, runs.ba)).toBeLessThanOrEqual(4);
  });

  it('rolls back everything a failed transaction wrote', async () => {
    await expect(
      db.tx(async (c) => {
        await db.run("INSERT INTO organizations (id, name, created_at) VALUES ('c', 'c', 'now')", [], c);
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    expect(await db.row("SELECT id FROM organizations WHERE id = 'c'")).toBeUndefined();
  });
});
