import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { postgresDialect } from '../../server/store/dialect.ts';
import { migrate, PgDb } from '../../server/store/postgres/db.ts';
import { hotQueries } from '../../server/store/queries/hot-paths.ts';
import { createTestDatabase } from '../helpers/postgres.ts';

/**
 * Prepared statements on PostgreSQL: a create's batch (`batch(…, { prepared: true })`) and the hot
 * paths' lone reads are parsed once per connection and bound by name afterwards, where every run
 * was parsed and planned anew (a fifth of PostgreSQL's CPU per create). One connection in the pool,
 * so every statement runs on the client whose ParseComplete answers are counted.
 */
describe('prepared statements on PostgreSQL', () => {
  let db: PgDb;
  let parses = 0;
  const hot = hotQueries(postgresDialect);
  const prepared = async () =>
    (await db.rows<{ name: string; statement: string }>("SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'cp\\_%' ORDER BY name")).map(
      (r) => r.statement,
    );
  const insert = (id: number, name: string) => ({ sql: 'INSERT INTO items (id, name) VALUES (@id, @name)', params: { id, name } });
  const note = (id: number, text: string) => ({ sql: 'INSERT INTO notes (item_id, note) VALUES (?, ?)', params: [id, text] });

  beforeAll(async () => {
    db = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 1 });
    db.pool.on('connect', (client: pg.PoolClient) => {
      (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('parseComplete', () => (parses += 1));
    });
    await migrate(db);
    await db.run('CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL UNIQUE)');
    await db.run('CREATE TABLE notes (item_id BIGINT NOT NULL REFERENCES items (id), note TEXT NOT NULL)');
  });
  afterAll(async () => {
    await db?.close();
  });

  it('a prepared batch parses its statements on the first run only; an unprepared one parses them every run', async () => {
    let before = parses;
    await db.batch([insert(1, 'one'), note(1, 'first')], { prepared: true });
    expect(parses - before).toBe(2);
    before = parses;
    for (let i = 2; i <= 4; i += 1) await db.batch([insert(i, `item ${i}`), note(i, 'again')], { prepared: true });
    expect(parses - before).toBe(0);
    expect(await prepared()).toEqual(
      expect.arrayContaining(['INSERT INTO items (id, name) VALUES ($1, $2)', 'INSERT INTO notes (item_id, note) VALUES ($1, $2)']),
    );
    before = parses;
    for (let i = 5; i <= 7; i += 1) await db.batch([insert(i, `item ${i}`), note(i, 'unprepared')]);
    expect(parses - before).toBe(6);
    expect(await db.row('SELECT count(*) AS n FROM notes')).toEqual({ n: 7 });
  });

  it('after a refused prepared batch the connection prepares again only what it may have lost, and the next batch is answered', async () => {
    // The same text as `insert`'s once numbered: the same prepared statement.
    const taken = { sql: 'INSERT INTO items (id, name) VALUES (?, ?)', params: [100, 'one'] };
    const count = { sql: 'SELECT count(*) AS n FROM items WHERE id >= ?', params: [100] };
    // The unique violation is the second statement's; the third (never prepared before) is skipped.
    await expect(db.batch([insert(99, 'ninety-nine'), taken, count], { prepared: true })).rejects.toMatchObject({ code: '23505' });
    // A NUL is refused at the first, already prepared statement.
    await expect(db.batch([insert(98, 'a\u0000b'), note(1, 'never')], { prepared: true })).rejects.toMatchObject({ code: '22021' });
    const before = parses;
    const results = await db.batch([insert(100, 'hundred'), count, note(100, 'kept')], { prepared: true });
    // The insert (refused for its NUL) and the count (skipped after the violation) prepared again, closed first; the note kept.
    expect(parses - before).toBe(2);
    expect(results[1]!.rows).toEqual([{ n: 1 }]);
    expect(await db.row('SELECT count(*) AS n FROM items WHERE id IN (98, 99)')).toEqual({ n: 0 });
  });

  it("the hot paths' lone reads are prepared; other reads are not", async () => {
    const id = crypto.randomUUID();
    let before = parses;
    for (let i = 0; i < 3; i += 1) expect(await db.row(hot.revision, [id, 'd', 't'])).toBeUndefined();
    expect(parses - before).toBe(1);
    expect(await prepared()).toContain(hot.revision.replace('?', '$1').replace('?', '$2').replace('?', '$3'));
    before = parses;
    for (let i = 0; i < 3; i += 1) await db.row('SELECT count(*) AS n FROM items WHERE id > ?', [i]);
    expect(parses - before).toBe(3);
  });

  it('a prepared read or batch whose columns a migration changed is prepared again and answered, not refused', async () => {
    expect(await db.row(hot.deploymentById, ['none'])).toBeUndefined();
    const star = { sql: 'SELECT * FROM items WHERE id = ?', params: [1] };
    expect((await db.batch([star], { prepared: true }))[0]!.rows[0]).toEqual({ id: 1, name: 'one' });
    // What another process's migration does while this one's statements are prepared.
    await db.run('ALTER TABLE deployments ADD COLUMN added_later TEXT');
    await db.run('ALTER TABLE items ADD COLUMN added_later TEXT');
    expect(await db.row(hot.deploymentById, ['none'])).toBeUndefined();
    expect((await db.batch([star], { prepared: true }))[0]!.rows[0]).toEqual({ id: 1, name: 'one', added_later: null });
  });

  it('a prepared statement the connection lost (deallocated behind its back, as a pooler in front would) is prepared again and answered', async () => {
    const id = crypto.randomUUID();
    expect(await db.row(hot.revisionById, [id])).toBeUndefined();
    const star = { sql: 'SELECT name FROM items WHERE id = ?', params: [1] };
    await db.batch([star], { prepared: true });
    await db.run('DEALLOCATE ALL');
    expect(await prepared()).toEqual([]);
    const before = parses;
    expect(await db.row(hot.revisionById, [id])).toBeUndefined();
    expect((await db.batch([star], { prepared: true }))[0]!.rows).toEqual([{ name: 'one' }]);
    // Each refused once (26000), then closed, prepared again and run.
    expect(parses - before).toBe(2);
    expect((await prepared()).length).toBe(2);
  });
});
