import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { PgDb } from '../../server/store/postgres/db.ts';
import { createTestDatabase } from '../helpers/postgres.ts';

/**
 * `PgDb.batch`: a create's statements in one round trip and one transaction, on the run's real
 * PostgreSQL. One connection in the pool, so every statement below runs on the client whose
 * answers are counted: a ReadyForQuery is the end of one round trip.
 */
describe('PgDb.batch (statements pipelined in one round trip)', () => {
  let db: PgDb;
  let roundTrips = 0;
  let connects = 0;
  const backendPid = async () => (await db.row<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!.pid;

  beforeAll(async () => {
    db = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 1 });
    db.pool.on('connect', (client: pg.PoolClient) => {
      connects += 1;
      (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('readyForQuery', () => (roundTrips += 1));
    });
    await db.run('CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL UNIQUE)');
    await db.run('CREATE TABLE notes (item_id BIGINT NOT NULL REFERENCES items (id), note TEXT NOT NULL)');
  });
  afterAll(async () => {
    await db?.close();
  });

  it('runs every statement in order in ONE round trip, answering each (RETURNING rows, counts, 64-bit integers as numbers)', async () => {
    const before = roundTrips;
    const results = await db.batch([
      { sql: 'INSERT INTO items (id, name) VALUES (?, ?) RETURNING id, name', params: [1, 'one'] },
      { sql: 'INSERT INTO notes (item_id, note) VALUES (@id, @note)', params: { id: 1, note: 'first' } },
      // Sees the rows the statements before it wrote: the same transaction.
      { sql: 'UPDATE notes SET note = ? WHERE item_id = ?', params: ['changed', 1] },
      { sql: 'SELECT count(*) AS n FROM notes WHERE note = ?', params: ['changed'] },
    ]);
    expect(roundTrips - before).toBe(1);
    expect(results.map((r) => r.rowCount)).toEqual([1, 1, 1, 1]);
    expect(results[0]!.rows).toEqual([{ id: 1, name: 'one' }]);
    expect(results[3]!.rows).toEqual([{ n: 1 }]);
    // The same work as a transaction: BEGIN, four statements, COMMIT.
    const beforeTx = roundTrips;
    await db.tx(async (tx) => {
      await tx.run('INSERT INTO items (id, name) VALUES (?, ?)', [2, 'two']);
      await tx.run('INSERT INTO notes (item_id, note) VALUES (?, ?)', [2, 'first']);
      await tx.run('UPDATE notes SET note = ? WHERE item_id = ?', ['changed', 2]);
      await tx.row('SELECT count(*) AS n FROM notes WHERE note = ?', ['changed']);
    });
    expect(roundTrips - beforeTx).toBe(6);
  });

  it('a statement PostgreSQL refuses rolls the whole batch back, answers its own error, and leaves the connection in the pool', async () => {
    await db.run('DELETE FROM notes');
    await db.run('DELETE FROM items');
    const pid = await backendPid();
    const connectsBefore = connects;
    const refusals: Array<[string, pg.QueryResult[] | Promise<unknown>, string]> = [
      [
        'a unique violation after a write',
        db.batch([
          { sql: 'INSERT INTO items (id, name) VALUES (?, ?)', params: [10, 'taken'] },
          { sql: 'INSERT INTO notes (item_id, note) VALUES (?, ?)', params: [10, 'kept?'] },
          { sql: 'INSERT INTO items (id, name) VALUES (?, ?)', params: [11, 'taken'] },
          { sql: 'INSERT INTO notes (item_id, note) VALUES (?, ?)', params: [11, 'never run'] },
        ]),
        '23505',
      ],
      [
        'a NUL in text',
        db.batch([
          { sql: 'INSERT INTO items (id, name) VALUES (?, ?)', params: [12, 'fine'] },
          { sql: 'INSERT INTO items (id, name) VALUES (?, ?)', params: [13, 'a\u0000b'] },
        ]),
        '22021',
      ],
      [
        'a foreign key',
        db.batch([
          { sql: 'INSERT INTO items (id, name) VALUES (?, ?)', params: [14, 'fine'] },
          { sql: 'INSERT INTO notes (item_id, note) VALUES (?, ?)', params: [999, 'no such item'] },
        ]),
        '23503',
      ],
    ];
    for (const [what, batch, code] of refusals) await expect(batch, what).rejects.toMatchObject({ code });
    expect(await db.rows('SELECT * FROM items')).toEqual([]);
    expect(await db.rows('SELECT * FROM notes')).toEqual([]);
    expect(await backendPid()).toBe(pid);
    expect(connects).toBe(connectsBefore);
    // And the connection takes the next batch.
    await db.batch([{ sql: 'INSERT INTO items (id, name) VALUES (?, ?)', params: [20, 'after'] }]);
    expect(await db.rows('SELECT id FROM items')).toEqual([{ id: 20 }]);
  });

  it('an error in one batch does not leak into the next one queued on the same connection', async () => {
    // Both go to the one pooled client; the second is queued behind the first's answer.
    const [failed, next] = await Promise.allSettled([
      db.batch([{ sql: 'INSERT INTO items (id, name) VALUES (?, ?)', params: [20, 'duplicate id'] }]),
      db.batch([{ sql: 'INSERT INTO items (id, name) VALUES (?, ?) RETURNING name', params: [21, 'queued'] }]),
    ]);
    expect(failed).toMatchObject({ status: 'rejected', reason: { code: '23505' } });
    expect(next).toMatchObject({ status: 'fulfilled', value: [{ rows: [{ name: 'queued' }] }] });
  });
});
