import { getHeapSpaceStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { releaseStartGarbage } from '../../server/lib/start-garbage.ts';

/** Bytes V8 holds for its young generation (both semi-spaces). */
const youngGenerationBytes = () => getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')!.space_size;

/** Allocates as a start does: many objects that live through a few scavenges, so V8 grows its young generation. */
function allocateLikeAStart(): number {
  const kept: object[] = new Array(50_000);
  let checksum = 0;
  for (let i = 0; i < 2_000_000; i += 1) {
    kept[i % kept.length] = { i, name: `schema-${i}`, checks: [i] };
    checksum += i;
  }
  return checksum + kept.length;
}

describe('releaseStartGarbage (server/main.ts, after listening)', () => {
  it("shrinks the young generation that a start's allocations grew", () => {
    allocateLikeAStart();
    const grown = youngGenerationBytes();
    releaseStartGarbage();
    const released = youngGenerationBytes();
    // V8's largest young generation is 16 MB of semi-spaces by default, its smallest 1 MB.
    expect(grown).toBeGreaterThanOrEqual(4 * 2 ** 20);
    expect(released).toBeLessThanOrEqual(grown / 2);
  });

  it('can run again (a second server in one process)', () => {
    allocateLikeAStart();
    expect(() => releaseStartGarbage()).not.toThrow();
  });
});
