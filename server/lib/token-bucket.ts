export type TokenRate = {
  /** Tokens regained per second. */
  perSecond: number;
  /** Tokens held at most (a new bucket starts full). */
  burst: number;
};

/**
 * A token bucket: it holds up to `burst` tokens and regains `perSecond` of them a second. Time is
 * the caller's, in milliseconds (`performance.now()`, `Date.now()` or a test's movable clock), so
 * the bucket keeps no timer and a clock that steps back only pauses the refill.
 */
export class TokenBucket {
  readonly perSecond: number;
  readonly burst: number;
  #tokens: number;
  #at: number;

  constructor(rate: TokenRate, nowMs: number) {
    this.perSecond = rate.perSecond;
    this.burst = rate.burst;
    this.#tokens = rate.burst;
    this.#at = nowMs;
  }

  /** The tokens held at `nowMs` (fractions included). */
  available(nowMs: number): number {
    this.#tokens = Math.min(this.burst, this.#tokens + (Math.max(0, nowMs - this.#at) / 1000) * this.perSecond);
    this.#at = Math.max(this.#at, nowMs);
    return this.#tokens;
  }

  /** Whether the bucket is full at `nowMs`: the same as no bucket at all, so it may be forgotten. */
  isFull(nowMs: number): boolean {
    return this.available(nowMs) >= this.burst;
  }

  /** Takes `count` tokens, or as many as it holds when fewer (never below empty). */
  take(count: number, nowMs: number): void {
    this.#tokens = Math.max(0, this.available(nowMs) - count);
  }

  /** Seconds until the bucket holds `count` tokens (0 when it holds them now). */
  secondsUntil(count: number, nowMs: number): number {
    return Math.max(0, count - this.available(nowMs)) / this.perSecond;
  }
}
