import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PgDb } from '../../server/store/postgres/db.ts';
import { createTestDatabase } from '../helpers/postgres.ts';

/**
 * `PgDb`'s lone reads grouped while one is in flight (`ReadBatcher`), on the run's real PostgreSQL.
 * One connection in the pool and one read in flight at a time, so the grouping does not depend on
 * timing: while the first read is out, every read asked for waits, and they leave together when it
 * is answered. A ReadyForQuery is the end of one round trip.
 */
describe('PgDb lone reads grouped into one round trip while one is in flight', () => {
  let db: PgDb;
  let roundTrips = 0;
  let connects = 0;
  const byId = 'SELECT id, name FROM items WHERE id = ?';

  beforeAll(async () => {
    db = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 1, readsInFlight: 1 });
    db.pool.on('connect', (client: pg.PoolClient) => {
      connects += 1;
      (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('readyForQuery', () => (roundTrips += 1));
    });
    await db.run('CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL)');
    await db.run('INSERT INTO items (id, name) SELECT n, $$item $$ || n FROM generate_series(1, 20) AS n');
  });
  afterAll(async () => {
    await db?.close();
  });

  it('the reads asked for while one is out leave together in ONE round trip, each answered with its own rows', async () => {
    const before = roundTrips;
    const ids = Array.from({ length: 20 }, (_, i) => i + 1);
    const answers = await Promise.all([
      ...ids.map((id) => db.row(byId, [id])),
      db.rows('SELECT id FROM items WHERE id <= @most ORDER BY id', { most: 3 }),
      db.row(byId, [999]),
    ]);
    // The first read alone, then the other 21 at once.
    expect(roundTrips - before).toBe(2);
    expect(answers.slice(0, 20)).toEqual(ids.map((id) => ({ id, name: `item ${id}` })));
    expect(answers[20]).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
    expect(answers[21]).toBeUndefined();
  });

  it('a read PostgreSQL refuses answers its own error; the reads before it are answered, the ones after it sent again, the connection kept', async () => {
    const pid = (await db.row<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!.pid;
    const connectsBefore = connects;
    const before = roundTrips;
    const [first, beforeIt, refused, afterIt, last] = await Promise.allSettled([
      db.row(byId, [1]),
      db.row(byId, [2]),
      db.row('SELECT id FROM items WHERE name = ?', ['a\u0000b']),
      db.row(byId, [3]),
      db.row(byId, [4]),
    ]);
    expect(first).toEqual({ status: 'fulfilled', value: { id: 1, name: 'item 1' } });
    expect(beforeIt).toEqual({ status: 'fulfilled', value: { id: 2, name: 'item 2' } });
    expect(refused).toMatchObject({ status: 'rejected', reason: { code: '22021' } });
    expect(afterIt).toEqual({ status: 'fulfilled', value: { id: 3, name: 'item 3' } });
    expect(last).toEqual({ status: 'fulfilled', value: { id: 4, name: 'item 4' } });
    // The first alone; the other four until the refusal; the two skipped, sent again.
    expect(roundTrips - before).toBe(3);
    expect((await db.row<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!.pid).toBe(pid);
    expect(connects).toBe(connectsBefore);
  });

  it('a connection that fails during a batch fails the reads it did not answer; the next reads go on a new connection', async () => {
    const admin = new PgDb(inject('postgresAdminUrl'), { max: 1 });
    try {
      const pid = (await db.row<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!.pid;
      const slow = 'SELECT count(*) AS n FROM generate_series(1, 1000000000) AS n';
      const asked = Promise.allSettled([db.row(byId, [1]), db.row(slow), db.row(byId, [2])]);
      // The batch [slow read, read 2] runs after read 1 is answered: its backend is ended while it runs.
      while (!(await admin.row('SELECT 1 FROM pg_stat_activity WHERE pid = ? AND query = ?', [pid, slow]))) await new Promise((r) => setImmediate(r));
      await admin.row('SELECT pg_terminate_backend(?)', [pid]);
      const [first, cut, after] = await asked;
      expect(first).toEqual({ status: 'fulfilled', value: { id: 1, name: 'item 1' } });
      expect(cut.status).toBe('rejected');
      expect(after.status).toBe('rejected');
      const connectsBefore = connects;
      expect(await Promise.all([db.row(byId, [3]), db.row(byId, [4])])).toEqual([
        { id: 3, name: 'item 3' },
        { id: 4, name: 'item 4' },
      ]);
      expect(connects).toBe(connectsBefore + 1);
    } finally {
      await admin.close();
    }
  });

  it('a read that locks rows, and a write, keep their own round trip', async () => {
    const before = roundTrips;
    const [, locked, written] = await Promise.all([
      db.row(byId, [1]),
      db.row<{ id: number }>('SELECT id FROM items WHERE id = ? FOR UPDATE', [5]),
      db.run('UPDATE items SET name = ? WHERE id = ?', ['renamed', 6]),
      db.row(byId, [7]),
      db.row(byId, [8]),
    ]);
    expect(locked).toEqual({ id: 5 });
    expect(written).toBe(1);
    // Grouped, the last four would have been one: the first read, the locking read, the write, then the two plain reads together.
    expect(roundTrips - before).toBe(4);
  });
});
