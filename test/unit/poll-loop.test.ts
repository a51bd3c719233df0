import { afterEach, describe, expect, it, vi } from 'vitest';
import { PolledWorker, PollLoop, sweepLoop } from '../../server/lib/poll-loop.ts';

afterEach(() => {
  vi.useRealTimers();
});

describe('PollLoop', () => {
  it('runs its pass only while this process leads, after the first delay, then each interval after a pass ends; a failed pass is reported and the loop goes on', async () => {
    vi.useFakeTimers();
    let leading = false;
    const passes: number[] = [];
    const errors: unknown[] = [];
    const loop = new PollLoop({
      pass: async () => {
        passes.push(Date.now());
        if (passes.length === 2) throw new Error('the second pass fails');
      },
      intervalMs: 100,
      firstDelayMs: 1000,
      lead: async () => leading,
      onError: (error) => errors.push(error),
    });
    const start = Date.now();
    loop.start();
    await vi.advanceTimersByTimeAsync(999);
    expect(passes).toEqual([]);
    await vi.advanceTimersByTimeAsync(301);
    expect(passes).toEqual([]);
    leading = true;
    await vi.advanceTimersByTimeAsync(200);
    expect(passes.map((at) => at - start)).toEqual([1400, 1500]);
    expect(errors).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(100);
    expect(passes).toHaveLength(3);
    loop.stop();
    expect(loop.stopped).toBe(true);
    await vi.advanceTimersByTimeAsync(1000);
    expect(passes).toHaveLength(3);
  });

  it('a PolledWorker is its pass on a loop: started at once, stopped in the middle of a pass', async () => {
    vi.useFakeTimers();
    const seen: boolean[] = [];
    class Worker extends PolledWorker {
      protected async pass(): Promise<void> {
        this.stop();
        seen.push(this.stopped);
      }
    }
    const worker = new Worker({ intervalMs: 100, onError: (error) => seen.push(Boolean(error)) });
    worker.start();
    await vi.advanceTimersByTimeAsync(500);
    expect(seen).toEqual([true]);
  });

  it('a sweep runs one interval after start (or at once with atStart) and says only what it removed', async () => {
    vi.useFakeTimers();
    const counts = [0, 3];
    const removed: number[] = [];
    const start = Date.now();
    const sweptAt: number[] = [];
    const loop = sweepLoop({
      sweep: async () => {
        sweptAt.push(Date.now() - start);
        return counts.shift() ?? 0;
      },
      everyMs: 1000,
      onRemoved: (count) => removed.push(count),
      onError: () => {},
    });
    loop.start();
    await vi.advanceTimersByTimeAsync(2500);
    loop.stop();
    expect(sweptAt).toEqual([1000, 2000]);
    expect(removed).toEqual([3]);
    const atStart: number[] = [];
    const eager = sweepLoop({ sweep: async () => (atStart.push(Date.now() - start), 0), everyMs: 1000, atStart: true, onError: () => {} });
    eager.start();
    await vi.advanceTimersByTimeAsync(0);
    eager.stop();
    expect(atStart).toEqual([2500]);
  });
});
