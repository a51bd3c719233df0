import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RevisionWatch, Waiter } from '../../server/lib/revision-watch.ts';

/** The watch's timeouts on a movable clock: one timer per list of waiters with the same timeout. */
describe('RevisionWatch timeouts', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const settled = async (promise: Promise<boolean>) => {
    let outcome: boolean | 'pending' = 'pending';
    void promise.then((changed) => (outcome = changed));
    await vi.advanceTimersByTimeAsync(0);
    return outcome;
  };

  it('ends each wait unchanged at its own deadline, in order, whatever else finished meanwhile', async () => {
    const watch = new RevisionWatch();
    const first = watch.wait('a', 1000);
    await vi.advanceTimersByTimeAsync(300);
    const second = watch.wait('b', 1000);
    const cancelled = watch.wait('c', 1000);
    await vi.advanceTimersByTimeAsync(100);
    const third = watch.wait('a', 1000);
    const longer = watch.wait('a', 5000);
    cancelled.cancel();
    expect(await settled(cancelled.changed)).toBe(false);
    expect(watch.size).toBe(4);

    await vi.advanceTimersByTimeAsync(599); // 999 ms after the first
    expect(await settled(first.changed)).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(first.changed)).toBe(false);
    expect(await settled(second.changed)).toBe('pending');
    await vi.advanceTimersByTimeAsync(300);
    expect(await settled(second.changed)).toBe(false);
    expect(await settled(third.changed)).toBe('pending');
    await vi.advanceTimersByTimeAsync(100);
    expect(await settled(third.changed)).toBe(false);
    expect(watch.size).toBe(1);
    await vi.advanceTimersByTimeAsync(3999); // 4,999 ms after it started
    expect(await settled(longer.changed)).toBe('pending');
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(longer.changed)).toBe(false);
    expect(watch.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("a change wakes its revision's waiters with the value, leaves the others, and the timer goes with the last", async () => {
    const watch = new RevisionWatch();
    const a1 = watch.wait('a', 1000);
    const a2 = watch.wait('a', 1000);
    const b = watch.wait('b', 1000);
    watch.notify('a', { version: 2 });
    expect(await settled(a1.changed)).toBe(true);
    expect(await settled(a2.changed)).toBe(true);
    expect(a1.value()).toEqual({ version: 2 });
    expect(await settled(b.changed)).toBe('pending');
    expect(vi.getTimerCount()).toBe(1);
    watch.notify('b');
    expect(await settled(b.changed)).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    // A new wait after the list emptied gets a timer of its own again.
    const again = watch.wait('a', 1000);
    await vi.advanceTimersByTimeAsync(1000);
    expect(await settled(again.changed)).toBe(false);
  });

  it('a change answers all its waiters before it takes any off its lists, and each is settled and released once', async () => {
    const watch = new RevisionWatch();
    const events: string[] = [];
    /** Records its answer, its client's listener removed and its release, in order. */
    class Recording extends Waiter {
      readonly name: string;
      constructor(name: string, revisionId = 'a') {
        super(revisionId);
        this.name = name;
      }
      protected override settled(changed: boolean, value: unknown): void {
        events.push(`${this.name} answered ${changed} ${JSON.stringify(value)} settling=${this.settling}`);
        // A client going away as its answer is written (the response's 'close') changes nothing more.
        this.cancel();
      }
      protected override unwatchGone(): void {
        events.push(`${this.name} unwatched`);
      }
      protected override afterRelease(): void {
        events.push(`${this.name} released`);
      }
    }
    const waiters = ['w1', 'w2', 'w3'].map((name) => watch.hold(new Recording(name), 1000));
    const other = watch.hold(new Recording('b', 'b'), 1000);
    expect(watch.size).toBe(4);
    watch.notify('a', { version: 2 });
    expect(events).toEqual([
      'w1 answered true {"version":2} settling=true',
      'w2 answered true {"version":2} settling=true',
      'w3 answered true {"version":2} settling=true',
      'w1 unwatched',
      'w1 released',
      'w2 unwatched',
      'w2 released',
      'w3 unwatched',
      'w3 released',
    ]);
    expect(waiters.every((waiter) => !waiter.settling && waiter.list === undefined)).toBe(true);
    expect(watch.size).toBe(1);
    // Released once: another notice, an announce or a cancel after the change does nothing.
    watch.notify('a', { version: 3 });
    waiters[0]!.announce({ version: 4 });
    waiters[1]!.cancel();
    expect(events).toHaveLength(9);
    // A waiter ended alone (here by its deadline) is released before it is answered, as before.
    await vi.advanceTimersByTimeAsync(1000);
    expect(events.slice(9)).toEqual(['b unwatched', 'b released', 'b answered false undefined settling=false']);
    expect(other.list).toBe(undefined);
    expect(watch.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a client that goes away ends its wait and unregisters', async () => {
    const watch = new RevisionWatch();
    const controller = new AbortController();
    const waiter = watch.wait('a', 1000, controller.signal);
    controller.abort();
    expect(await settled(waiter.changed)).toBe(false);
    expect(watch.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a callback wait (waitThen) is settled once: on a change with its value, when announced, at its deadline, or when its client goes', async () => {
    const watch = new RevisionWatch();
    const calls: Array<[string, boolean, unknown]> = [];
    const record = (name: string) => (changed: boolean, value: unknown) => calls.push([name, changed, value]);
    watch.waitThen('a', 1000, undefined, record('changed'));
    const announced = watch.waitThen('b', 1000, undefined, record('announced'));
    watch.waitThen('c', 1000, undefined, record('timed out'));
    let unregistered = 0;
    let goneNow: () => void = () => {};
    watch.waitThen(
      'd',
      1000,
      (cancel) => {
        goneNow = cancel;
        return () => (unregistered += 1);
      },
      record('gone'),
    );
    expect(() => (announced as unknown as { changed: unknown }).changed).toThrow();
    watch.notify('a', { version: 2 });
    announced.announce({ version: 3 });
    announced.announce({ version: 4 });
    goneNow();
    goneNow();
    expect(calls).toEqual([
      ['changed', true, { version: 2 }],
      ['announced', true, { version: 3 }],
      ['gone', false, undefined],
    ]);
    expect(unregistered).toBe(1);
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls.at(-1)).toEqual(['timed out', false, undefined]);
    expect(calls).toHaveLength(4);
    expect(watch.size).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
