import type { Clock } from '../../server/lib/clock.ts';

export type MovableClock = Clock & { advance(ms: number): void };

/**
 * The server's clock, moved by the test: `advance` makes time pass without waiting for it.
 * By default it runs with the wall clock from there on; `standing` stands still but for the
 * test's moves, so nothing lapses (a lease, a listener's silence) because the machine was slow.
 */
export function movableClock(options: { standing?: boolean } = {}): MovableClock {
  const startMs = Date.now();
  let offsetMs = 0;
  const base = options.standing ? () => startMs : Date.now;
  return {
    now: () => new Date(base() + offsetMs).toISOString(),
    advance: (ms: number) => {
      offsetMs += ms;
    },
  };
}
