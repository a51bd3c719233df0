import { availableParallelism } from 'node:os';
import type pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { silentLogger } from '../../server/logger.ts';
import { PgCoordination } from '../../server/store/postgres/coordination.ts';
import { PgDb } from '../../server/store/postgres/db.ts';
import { ReadBatcher } from '../../server/store/postgres/read-batch.ts';
import { createTestDatabase } from '../helpers/postgres.ts';

/**
 * Several server processes on one PostgreSQL share the machine's cores: each sends its share of
 * lone reads at a time (`PgDb.sharedBy`), counted from the processes listening on the database
 * (`PgCoordination`), so three processes' reads form groups as large as one process's
 * (docs/decisions/postgresql-three-processes.md, session 47). Counts, not timings.
 */
const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

/** A process's store side: its pool and its listening connection, the counts it was told. */
async function serverProcess(url: string, countProcessesMs = 50): Promise<{ db: PgDb; coordination: PgCoordination; told: number[] }> {
  const db = new PgDb(url, { max: 64 });
  const told: number[] = [];
  const sharedBy = db.sharedBy.bind(db);
  db.sharedBy = (processes) => {
    told.push(processes);
    sharedBy(processes);
  };
  const coordination = await PgCoordination.open(url, db, silentLogger, { countProcessesMs });
  closing.push(
    () => db.close(),
    () => coordination.close(),
  );
  return { db, coordination, told };
}

async function eventually(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('the condition did not hold in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('lone reads in flight shared by the processes on one database', () => {
  it('each of three processes learns there are three, and one left when one stops', async () => {
    const url = await createTestDatabase(inject('postgresAdminUrl'));
    const three = [await serverProcess(url), await serverProcess(url), await serverProcess(url)];
    await eventually(() => three.every((p) => p.told.at(-1) === 3));
    await three[2]!.coordination.close();
    await eventually(() => three.slice(0, 2).every((p) => p.told.at(-1) === 2));
    // Never more than there were.
    expect(Math.max(...three.flatMap((p) => p.told))).toBe(3);
  });

  it('as many processes as cores: one read in flight per process, and the reads asked for meanwhile share one round trip', async () => {
    const db = new PgDb(await createTestDatabase(inject('postgresAdminUrl')), { max: 64 });
    closing.push(() => db.close());
    let roundTrips = 0;
    db.pool.on('connect', (client: pg.PoolClient) => {
      (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('readyForQuery', () => (roundTrips += 1));
    });
    // One process alone sends one read per core (no more than half the pool).
    expect(db.readsInFlight).toBe(Math.min(availableParallelism(), 32));
    db.sharedBy(availableParallelism());
    expect(db.readsInFlight).toBe(1);
    await db.row('SELECT 1 AS one');
    const before = roundTrips;
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => db.row<{ n: number }>('SELECT ?::int AS n', [i])));
    expect(answers.map((a) => a!.n)).toEqual(Array.from({ length: 12 }, (_, i) => i));
    // The first alone, the eleven asked for while it was out together.
    expect(roundTrips - before).toBe(2);
    // More processes than cores: still one.
    db.sharedBy(availableParallelism() * 3);
    expect(db.readsInFlight).toBe(1);
  });

  it('a limit raised while reads wait sends them at once; a lowered one holds the next reads back', async () => {
    const sent: string[] = [];
    const answers: Array<() => void> = [];
    const batcher = new ReadBatcher(
      {
        one: (statement) => {
          sent.push(statement.text);
          return new Promise((resolve) => answers.push(() => resolve({ rows: [statement.text] } as unknown as pg.QueryResult)));
        },
        many: async () => {
          throw new Error('not in this test');
        },
      },
      1,
    );
    const first = batcher.read({ text: 'a', values: [] });
    const second = batcher.read({ text: 'b', values: [] });
    expect(sent).toEqual(['a']);
    batcher.inFlight = 2;
    expect(sent).toEqual(['a', 'b']);
    batcher.inFlight = 1;
    const third = batcher.read({ text: 'c', values: [] });
    expect(sent).toEqual(['a', 'b']);
    answers[0]!();
    expect((await first).rows).toEqual(['a']);
    await new Promise((resolve) => setImmediate(resolve));
    // One still out, at the lowered limit of one.
    expect(sent).toEqual(['a', 'b']);
    answers[1]!();
    expect((await second).rows).toEqual(['b']);
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual(['a', 'b', 'c']);
    answers[2]!();
    expect((await third).rows).toEqual(['c']);
  });
});
