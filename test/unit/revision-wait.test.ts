import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type RevisionAnswer, RevisionWait } from '../../server/domain/revision-wait.ts';
import { Revisions, revisionEtag } from '../../server/domain/revisions.ts';
import { RevisionWatch } from '../../server/lib/revision-watch.ts';
import type { RevisionRecord } from '../../server/store/types.ts';

// Revisions.hold, the fast lane's wait (the request is its own waiter), on a stand-in store whose reads answer a
// script of versions (or fail): the races it must get right — a change between registering and
// the second read, that read failing — cannot be caused on demand in a real store.

const revision = (version: number) => ({ id: 'r', deployment_id: 'd', version }) as unknown as RevisionRecord;
/** What a wait answers for `record`: the record, its own ETag, and whether it changed. */
const answerOf = (record: RevisionRecord, changed: boolean): RevisionAnswer => ({ revision: record, etag: revisionEtag(record), changed });

/** A held request as the fast lane's: knows one version, records its answers and when it listened for its client going away. */
class RecordedWait extends RevisionWait {
  readonly answers: Array<{ error: unknown; answer?: RevisionAnswer }> = [];
  readonly goneEvents: string[] = [];
  readonly #known: string;

  constructor(known: string, tenantId = 't') {
    super(tenantId, 'd', 'r');
    this.#known = known;
  }

  isKnown(etag: string): boolean {
    return etag === this.#known;
  }

  answered(error: unknown, answer?: RevisionAnswer): void {
    this.answers.push(answer ? { error, answer } : { error });
  }

  protected override watchGone(): void {
    this.goneEvents.push('watch');
  }

  protected override unwatchGone(): void {
    this.goneEvents.push('unwatch');
  }
}

function setUp(reads: Array<RevisionRecord | Error>) {
  const watch = new RevisionWatch();
  const store = {
    getRevision: async () => {
      const next = reads.shift();
      if (next instanceof Error) throw next;
      return next ?? null;
    },
    getDeployment: async () => ({ id: 'd' }),
  };
  const revisions = new Revisions({ store: store as never, watch });
  const wait = new RecordedWait(revisionEtag(revision(1)));
  const start = (waitMs = 1000) => revisions.hold(wait, waitMs);
  return { watch, wait, answers: wait.answers, start };
}

describe("Revisions.hold (the fast lane's long-poll)", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('answers a change announced while it waits with the announced record, once', async () => {
    const { watch, answers, start } = setUp([revision(1), revision(1)]);
    start();
    await vi.advanceTimersByTimeAsync(0);
    expect(watch.size).toBe(1);
    watch.notify('r', revision(2));
    await vi.advanceTimersByTimeAsync(0);
    expect(answers).toEqual([{ error: null, answer: answerOf(revision(2), true) }]);
    watch.notify('r', revision(3));
    await vi.advanceTimersByTimeAsync(0);
    expect(answers).toHaveLength(1);
  });

  it("waiters woken one after another by different records answer each its own record's ETag (one ETag made per record, not per waiter)", async () => {
    const { watch, answers, start } = setUp([revision(1), revision(1), revision(1), revision(1)]);
    start();
    await vi.advanceTimersByTimeAsync(0);
    const second = setUp([revision(1), revision(1)]);
    second.start();
    await vi.advanceTimersByTimeAsync(0);
    const two = revision(2);
    watch.notify('r', two);
    second.watch.notify('r', revision(3));
    await vi.advanceTimersByTimeAsync(0);
    expect(answers).toEqual([{ error: null, answer: answerOf(two, true) }]);
    expect(answers[0]!.answer!.etag).toBe('"r.2"');
    expect(second.answers).toEqual([{ error: null, answer: answerOf(revision(3), true) }]);
    expect(second.answers[0]!.answer!.etag).toBe('"r.3"');
    // A record of the version the client holds is not a change, whichever record came before.
    const third = setUp([revision(1), revision(1)]);
    third.start();
    await vi.advanceTimersByTimeAsync(0);
    third.watch.notify('r', revision(1));
    await vi.advanceTimersByTimeAsync(0);
    expect(third.answers).toEqual([{ error: null, answer: answerOf(revision(1), false) }]);
  });

  it('listens for its client going away while it waits, and stops once; a client gone reads again and answers unchanged', async () => {
    const { watch, wait, answers, start } = setUp([revision(1), revision(1), revision(1)]);
    start();
    await vi.advanceTimersByTimeAsync(0);
    expect(wait.goneEvents).toEqual(['watch']);
    wait.cancel();
    await vi.advanceTimersByTimeAsync(0);
    expect(wait.goneEvents).toEqual(['watch', 'unwatch']);
    expect(answers).toEqual([{ error: null, answer: answerOf(revision(1), false) }]);
    expect(watch.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('answers a change made between registering and the second read, and leaves no waiter', async () => {
    const { watch, answers, start } = setUp([revision(1), revision(2)]);
    start();
    await vi.advanceTimersByTimeAsync(0);
    expect(answers).toEqual([{ error: null, answer: answerOf(revision(2), true) }]);
    expect(watch.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('at its deadline reads again and answers unchanged', async () => {
    const { answers, start } = setUp([revision(1), revision(1), revision(1)]);
    start();
    await vi.advanceTimersByTimeAsync(999);
    expect(answers).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(answers).toEqual([{ error: null, answer: answerOf(revision(1), false) }]);
  });

  it('a failing second read ends the wait and answers the error once; a failing first read answers it at once', async () => {
    const failure = new Error('the storage refused the read');
    const second = setUp([revision(1), failure]);
    second.start();
    await vi.advanceTimersByTimeAsync(2000);
    expect(second.answers).toEqual([{ error: failure }]);
    expect(second.watch.size).toBe(0);
    const first = setUp([failure]);
    first.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(first.answers).toEqual([{ error: failure }]);
  });

  it('without a wait answers the current record at once', async () => {
    const { wait, answers, start } = setUp([revision(1)]);
    start(0);
    await vi.advanceTimersByTimeAsync(0);
    expect(answers).toEqual([{ error: null, answer: answerOf(revision(1), false) }]);
    expect(wait.goneEvents).toEqual([]);
  });
});

describe('Revisions.hold: waiters woken together without the changed record', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  /** A store whose revision is `current`, counting the reads by tenant. */
  function sharedSetUp() {
    const watch = new RevisionWatch();
    const state = { current: revision(1), reads: [] as string[] };
    const store = {
      getRevision: async (tenantId: string) => {
        state.reads.push(tenantId);
        return state.current;
      },
      getDeployment: async () => ({ id: 'd' }),
    };
    const revisions = new Revisions({ store: store as never, watch });
    const hold = (count: number, tenantId = 't', waitMs = 1000) =>
      Array.from({ length: count }, () => {
        const wait = new RecordedWait(revisionEtag(state.current), tenantId);
        revisions.hold(wait, waitMs);
        return wait;
      });
    return { watch, state, hold };
  }

  it('read the revision once, and each answers what it read (a change from another process)', async () => {
    const { watch, state, hold } = sharedSetUp();
    const waits = hold(3);
    await vi.advanceTimersByTimeAsync(0);
    // Each wait read twice to start: before registering and after.
    expect(state.reads).toHaveLength(6);
    state.current = revision(2);
    watch.notify('r');
    await vi.advanceTimersByTimeAsync(0);
    expect(state.reads).toHaveLength(7);
    for (const wait of waits) expect(wait.answers).toEqual([{ error: null, answer: answerOf(revision(2), true) }]);
    // A later wake-up reads again: the read is shared only by the waiters it was started for.
    const later = hold(2);
    await vi.advanceTimersByTimeAsync(0);
    state.current = revision(3);
    watch.notify('r');
    await vi.advanceTimersByTimeAsync(0);
    expect(state.reads).toHaveLength(7 + 4 + 1);
    for (const wait of later) expect(wait.answers).toEqual([{ error: null, answer: answerOf(revision(3), true) }]);
  });

  it('read once when they reach their deadline together, and answer unchanged', async () => {
    const { state, hold } = sharedSetUp();
    const waits = hold(4);
    await vi.advanceTimersByTimeAsync(0);
    expect(state.reads).toHaveLength(8);
    await vi.advanceTimersByTimeAsync(1000);
    expect(state.reads).toHaveLength(9);
    for (const wait of waits) expect(wait.answers).toEqual([{ error: null, answer: answerOf(revision(1), false) }]);
  });

  it('of two tenants read each for its own tenant', async () => {
    const { watch, state, hold } = sharedSetUp();
    const mine = hold(2, 't');
    const theirs = hold(2, 'other');
    await vi.advanceTimersByTimeAsync(0);
    state.reads.length = 0;
    state.current = revision(2);
    watch.notify('r');
    await vi.advanceTimersByTimeAsync(0);
    expect(state.reads.sort()).toEqual(['other', 't']);
    for (const wait of [...mine, ...theirs]) expect(wait.answers).toHaveLength(1);
  });

  it('a failed shared read answers its error to each of them', async () => {
    const { watch, state, hold } = sharedSetUp();
    const waits = hold(2);
    await vi.advanceTimersByTimeAsync(0);
    const failure = new Error('the storage refused the read');
    state.current = Promise.reject(failure) as never;
    (state.current as unknown as Promise<unknown>).catch(() => {});
    watch.notify('r');
    await vi.advanceTimersByTimeAsync(0);
    for (const wait of waits) expect(wait.answers).toEqual([{ error: failure }]);
  });
});
