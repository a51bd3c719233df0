import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type RevisionAnswer, RevisionWait } from '../../server/domain/revision-wait.ts';
import { Revisions, revisionEtag } from '../../server/domain/revisions.ts';
import { RevisionWatch } from '../../server/lib/revision-watch.ts';
import type { RevisionRecord } from '../../server/store/types.ts';

// Revisions.hold, the fast lane's wait (the request is its own waiter), on a stand-in store whose reads answer a
// script of versions (or fail): the races it must get right — a change between registering and
// the second read, that read failing — cannot be caused on demand in a real store.

const revision = (version: number) => ({ id: 'r', deployment_id: 'd', version }) as unknown as RevisionRecord;

/** A held request as the fast lane's: knows one version, records its answers and when it listened for its client going away. */
class RecordedWait extends RevisionWait {
  readonly answers: Array<{ error: unknown; answer?: RevisionAnswer }> = [];
  readonly goneEvents: string[] = [];
  readonly #known: string;

  constructor(known: string) {
    super('t', 'd', 'r');
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
    expect(answers).toEqual([{ error: null, answer: { revision: revision(2), changed: true } }]);
    watch.notify('r', revision(3));
    await vi.advanceTimersByTimeAsync(0);
    expect(answers).toHaveLength(1);
  });

  it('listens for its client going away while it waits, and stops once; a client gone reads again and answers unchanged', async () => {
    const { watch, wait, answers, start } = setUp([revision(1), revision(1), revision(1)]);
    start();
    await vi.advanceTimersByTimeAsync(0);
    expect(wait.goneEvents).toEqual(['watch']);
    wait.cancel();
    await vi.advanceTimersByTimeAsync(0);
    expect(wait.goneEvents).toEqual(['watch', 'unwatch']);
    expect(answers).toEqual([{ error: null, answer: { revision: revision(1), changed: false } }]);
    expect(watch.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('answers a change made between registering and the second read, and leaves no waiter', async () => {
    const { watch, answers, start } = setUp([revision(1), revision(2)]);
    start();
    await vi.advanceTimersByTimeAsync(0);
    expect(answers).toEqual([{ error: null, answer: { revision: revision(2), changed: true } }]);
    expect(watch.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('at its deadline reads again and answers unchanged', async () => {
    const { answers, start } = setUp([revision(1), revision(1), revision(1)]);
    start();
    await vi.advanceTimersByTimeAsync(999);
    expect(answers).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(answers).toEqual([{ error: null, answer: { revision: revision(1), changed: false } }]);
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
    expect(answers).toEqual([{ error: null, answer: { revision: revision(1), changed: false } }]);
    expect(wait.goneEvents).toEqual([]);
  });
});
