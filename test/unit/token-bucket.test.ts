import { describe, expect, it } from 'vitest';
import { RuntimeLogLimits } from '../../server/domain/agents/runtime-log-limits.ts';
import { TokenBucket } from '../../server/lib/token-bucket.ts';

describe('TokenBucket', () => {
  it('starts full, regains its rate a second up to its burst, and says how long until it holds a count', () => {
    const bucket = new TokenBucket({ perSecond: 2, burst: 4 }, 1000);
    expect(bucket.available(1000)).toBe(4);
    bucket.take(3, 1000);
    expect(bucket.available(1000)).toBe(1);
    expect(bucket.secondsUntil(2, 1000)).toBe(0.5);
    expect(bucket.secondsUntil(1, 1000)).toBe(0);
    expect(bucket.available(1250)).toBe(1.5);
    expect(bucket.isFull(2000)).toBe(false);
    expect(bucket.isFull(2500)).toBe(true);
    expect(bucket.available(60_000)).toBe(4);
  });

  it('never goes below empty, and a clock that steps back pauses the refill instead of draining it', () => {
    const bucket = new TokenBucket({ perSecond: 1, burst: 2 }, 10_000);
    bucket.take(5, 10_000);
    expect(bucket.available(10_000)).toBe(0);
    expect(bucket.available(9_000)).toBe(0);
    expect(bucket.available(11_000)).toBe(1);
  });
});

describe('RuntimeLogLimits', () => {
  it('admits a deployment its burst then its rate, and shares one budget among a token’s deployments', () => {
    let now = 0;
    const limits = new RuntimeLogLimits({
      RUNTIME_LOG_LINES_PER_SECOND: 10,
      RUNTIME_LOG_BURST: 20,
      RUNTIME_LOG_TOKEN_LINES_PER_SECOND: 15,
      RUNTIME_LOG_TOKEN_BURST: 30,
    });
    const admit = (deploymentId: string, wanted: number) => limits.admit({ deploymentId, tokenId: 't', wanted, nowMs: now });
    expect(admit('a', 100)).toBe(20);
    expect(admit('a', 100)).toBe(0);
    // The token's burst (30) has 10 left.
    expect(admit('b', 100)).toBe(10);
    now += 1000;
    expect(admit('a', 100)).toBe(10);
    now += 100_000;
    expect(admit('a', 100)).toBe(20);
    expect(admit('a', 100)).toBe(0);
    // No cap of its own per revision: the store's cap binds (test/hardening/log-caps.test.ts).
    now += 100_000;
    expect(admit('a', 100)).toBe(20);
  });
});
