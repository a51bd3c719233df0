import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';
import type { StoreBackend } from '../../server/store/backend.ts';
import { openStore } from '../../server/store/open.ts';
import type { PgCoordination } from '../../server/store/postgres/coordination.ts';
import { testDatabaseUrl } from '../helpers/backends.ts';

/**
 * The coordination (issue 12): two `openStore` calls on one PostgreSQL database are two processes
 * for this purpose, each with its own pool and its own listening connection on a real server.
 */

const opened: StoreBackend[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((backend) => backend.close()));
});

async function open(url: string): Promise<StoreBackend> {
  const backend = await openStore(url, { secretBox: new SecretBox(randomBytes(32)) });
  opened.push(backend);
  return backend;
}

async function twoProcesses(): Promise<{ url: string; a: StoreBackend; b: StoreBackend }> {
  const url = await testDatabaseUrl('postgres');
  return { url, a: await open(url), b: await open(url) };
}

/** Polls `check` until it holds, for at most `ms` (a generous deadline, never a timing assertion). */
async function eventually(check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('the condition did not hold in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Kills a process's listening connection from outside, as a network cut or a server restart would. */
async function killListener(url: string, backend: StoreBackend): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [
      `control-plane:${(backend.coordination as PgCoordination).processId}`,
    ]);
    expect(rowCount).toBe(1);
  } finally {
    await client.end();
  }
}

describe('coordination on SQLite (one process)', () => {
  it('is the no-op: not shared, always the leader, publishing succeeds and reaches nobody', async () => {
    const backend = await open(':memory:');
    const heard: string[] = [];
    backend.coordination.subscribe('revision', (key) => heard.push(key));
    expect(backend.coordination.shared).toBe(false);
    await backend.coordination.publish('revision', 'r1');
    expect(await backend.coordination.publishAcknowledged('api-key-revoked', 'k1')).toBe(true);
    expect(await backend.coordination.tryLead('reconciler')).toBe(true);
    expect(heard).toEqual([]);
  });
});

describe('coordination on PostgreSQL (two processes on one database)', () => {
  it('carries a notice to the other process, not back to the sender, and keeps topics apart', async () => {
    const { a, b } = await twoProcesses();
    const atA: string[] = [];
    const atB: string[] = [];
    const otherTopicAtB: string[] = [];
    a.coordination.subscribe('revision', (key) => atA.push(key));
    b.coordination.subscribe('revision', (key) => atB.push(key));
    b.coordination.subscribe('listener-work', (key) => otherTopicAtB.push(key));
    await a.coordination.publish('revision', 'rev-1');
    await a.coordination.publish('revision', 'rev-2');
    await eventually(() => atB.length === 2);
    expect(atB).toEqual(['rev-1', 'rev-2']);
    // B sends one too: once A has it, A would also have had its own two by now, had they come back.
    await b.coordination.publish('listener-work', 'l-1');
    await b.coordination.publish('revision', 'rev-3');
    await eventually(() => atA.length === 1);
    expect(atA).toEqual(['rev-3']);
    expect(otherTopicAtB).toEqual([]);
  });

  it('many notices sent at once (several statements of them) all arrive', async () => {
    const { a, b } = await twoProcesses();
    const heard = new Set<string>();
    b.coordination.subscribe('revision', (key) => heard.add(key));
    const keys = Array.from({ length: 250 }, (_, i) => `rev-${i}`);
    await Promise.all(keys.map((key) => a.coordination.publish('revision', key)));
    await eventually(() => heard.size === keys.length);
    expect([...heard].sort()).toEqual([...keys].sort());
  });

  it('an unsubscribed handler hears nothing more', async () => {
    const { a, b } = await twoProcesses();
    const heard: string[] = [];
    const stop = b.coordination.subscribe('oauth-flow', (key) => heard.push(key));
    await a.coordination.publish('oauth-flow', 'f-1');
    await eventually(() => heard.length === 1);
    stop();
    await a.coordination.publish('oauth-flow', 'f-2');
    // A marker on another topic proves the second notice has been delivered by the time it arrives.
    const marker: string[] = [];
    b.coordination.subscribe('marker', (key) => marker.push(key));
    await a.coordination.publish('marker', 'm');
    await eventually(() => marker.length === 1);
    expect(heard).toEqual(['f-1']);
  });

  it('publishAcknowledged resolves only after every other process ran its handlers', async () => {
    const url = await testDatabaseUrl('postgres');
    const a = await open(url);
    const b = await open(url);
    const c = await open(url);
    const done = new Set<string>();
    b.coordination.subscribe('api-key-revoked', (key) => done.add(`b:${key}`));
    c.coordination.subscribe('api-key-revoked', (key) => done.add(`c:${key}`));
    expect(await a.coordination.publishAcknowledged('api-key-revoked', 'key-1')).toBe(true);
    // No waiting here: the answer itself says both handlers have run.
    expect([...done].sort()).toEqual(['b:key-1', 'c:key-1']);
  });

  it('publishAcknowledged gives up (false) when a listed process never answers', async () => {
    const { url, a } = await twoProcesses();
    // A session named like a listening process that never listens: a process hung or cut off.
    const silent = new pg.Client({ connectionString: url, application_name: 'control-plane:0000silent000000' });
    await silent.connect();
    try {
      expect(await a.coordination.publishAcknowledged('api-key-revoked', 'key-1', 300)).toBe(false);
    } finally {
      await silent.end();
    }
  });

  it('fires a resync when the listening connection is killed, and hears notices again after reconnecting', async () => {
    const { url, a, b } = await twoProcesses();
    let resyncs = 0;
    b.coordination.onResync(() => resyncs++);
    const heard: string[] = [];
    b.coordination.subscribe('revision', (key) => heard.push(key));
    await killListener(url, b);
    await eventually(() => resyncs >= 1);
    await eventually(() => (b.coordination as PgCoordination).listening);
    // Once listening again, a second resync covers what was sent while it was not.
    await eventually(() => resyncs >= 2);
    await a.coordination.publish('revision', 'after');
    await eventually(() => heard.includes('after'));
  });

  it('leadership: one process leads; when it closes, or its connection dies, another takes over', async () => {
    const { url, a, b } = await twoProcesses();
    expect(await a.coordination.tryLead('reconciler')).toBe(true);
    expect(await b.coordination.tryLead('reconciler')).toBe(false);
    // Asking again changes nothing; another singleton is a separate lock.
    expect(await a.coordination.tryLead('reconciler')).toBe(true);
    expect(await b.coordination.tryLead('reconciler')).toBe(false);
    expect(await b.coordination.tryLead('something-else')).toBe(true);

    // A's connection dies (its lock with it): B takes over; A, back, does not lead.
    await killListener(url, a);
    await eventually(() => b.coordination.tryLead('reconciler'));
    await eventually(() => (a.coordination as PgCoordination).listening);
    expect(await a.coordination.tryLead('reconciler')).toBe(false);

    // B closes (the process ends): A takes over at its next attempt.
    await b.close();
    await eventually(() => a.coordination.tryLead('reconciler'));
  });

  it('exclusive: work under one name runs in one process at a time; other names do not wait', async () => {
    const { a, b } = await twoProcesses();
    const events: string[] = [];
    const work = (who: string, ms: number) => async () => {
      events.push(`${who} in`);
      await new Promise((resolve) => setTimeout(resolve, ms));
      events.push(`${who} out`);
      return who;
    };
    const first = a.coordination.exclusive('refresh:t1', work('a', 300));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = b.coordination.exclusive('refresh:t1', work('b', 10));
    const other = b.coordination.exclusive('refresh:t2', work('other', 10));
    expect(await Promise.all([first, second, other])).toEqual(['a', 'b', 'other']);
    // b entered only after a left; the other name ran while a held its lock.
    expect(events.indexOf('b in')).toBeGreaterThan(events.indexOf('a out'));
    expect(events.indexOf('other out')).toBeLessThan(events.indexOf('a out'));
    // A failing work releases the lock too.
    await expect(a.coordination.exclusive('refresh:t1', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    // (b would wait its whole 20 s for a lock still held; 5 s is a generous deadline for a free one.)
    const stuck = new Promise((resolve) => setTimeout(() => resolve('still held'), 5000).unref());
    expect(await Promise.race([b.coordination.exclusive('refresh:t1', async () => 'free'), stuck])).toBe('free');
  });

  it('a notice too long for NOTIFY is not sent and does not throw', async () => {
    const { a, b } = await twoProcesses();
    const heard: string[] = [];
    b.coordination.subscribe('revision', (key) => heard.push(key.slice(0, 5)));
    await a.coordination.publish('revision', 'x'.repeat(9000));
    await a.coordination.publish('revision', 'short');
    await eventually(() => heard.length === 1);
    expect(heard).toEqual(['short']);
  });
});
