import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Revisions, revisionEtag } from '../../server/domain/revisions.ts';
import { RevisionWatch } from '../../server/lib/revision-watch.ts';
import type { RevisionRecord } from '../../server/store/types.ts';

// Revisions.whenChanged, the fast lane's callback wait, on a stand-in store whose reads answer a
// script of versions (or fail): the races it must get right — a change between registering and
// the second read, that read failing — cannot be caused on demand in a real store.

const revision = (version: number) => ({ id: 'r', deployment_id: 'd', version }) as unknown as RevisionRecord;

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
  const answers: Array<{ error: unknown; answer?: { revision: RevisionRecord; changed: boolean } }> = [];
  const known = revisionEtag(revision(1));
  const start = (waitMs = 1000) =>
    revisions.whenChanged(
      't',
      'd',
      'r',
      (etag) => etag === known,
      waitMs,
      undefined,
      (error, answer) => answers.push({ error, answer }),
    );
  return { watch, answers, start };
}

describe('Revisions.whenChanged (the callback long-poll)', () => {
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
    const { answers, start } = setUp([revision(1)]);
    start(0);
    await vi.advanceTimersByTimeAsync(0);
    expect(answers).toEqual([{ error: null, answer: { revision: revision(1), changed: false } }]);
  });
});
