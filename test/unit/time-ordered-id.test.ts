import { describe, expect, it } from 'vitest';
import { timeOrderedId } from '../../server/lib/time-ordered-id.ts';
import { Uuid } from '../../shared/schemas/common.ts';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** The Unix milliseconds in an id's first 48 bits (RFC 9562 §5.7). */
const millisecondsOf = (id: string) => Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);

describe('timeOrderedId', () => {
  it('is a version-7 UUID whose first 48 bits are the time given, in milliseconds', () => {
    for (const now of [0, 1, 2 ** 32 - 1, 2 ** 32, Date.parse('2026-11-29T17:00:00.123Z'), 2 ** 48 - 1]) {
      const id = timeOrderedId(now);
      expect(id).toMatch(UUID_V7);
      expect(millisecondsOf(id)).toBe(now);
    }
    const before = Date.now();
    const id = timeOrderedId();
    expect(millisecondsOf(id)).toBeGreaterThanOrEqual(before);
    expect(millisecondsOf(id)).toBeLessThanOrEqual(Date.now());
  });

  it('sorts as its times do: ids of later milliseconds sort after earlier ones, as text and as bytes', () => {
    const start = Date.parse('2026-11-29T17:00:00Z');
    const ids = Array.from({ length: 2_000 }, (_, i) => timeOrderedId(start + i * 7));
    expect([...ids].sort()).toEqual(ids);
  });

  it('makes none twice in one millisecond, across many draws of random bytes, every random position used', () => {
    const ids = new Set<string>();
    const seen = Array.from({ length: 36 }, () => new Set<string>());
    // 128 ids per draw: this crosses ~80 draws, all in the same millisecond.
    for (let i = 0; i < 10_000; i += 1) {
      const id = timeOrderedId(1_764_435_600_000);
      ids.add(id);
      [...id].forEach((char, at) => seen[at]!.add(char));
    }
    expect(ids.size).toBe(10_000);
    // After the time (0–12) and the version (14): every other hex position takes all 16 digits,
    // but the variant's (19: 8, 9, a or b); the dashes one character each.
    for (let at = 15; at < 36; at += 1) {
      const expected = [18, 23].includes(at) ? 1 : at === 19 ? 4 : 16;
      expect(seen[at]!.size, `position ${at}`).toBe(expected);
    }
  });

  it("is accepted by the API's own id schema (clients send these ids back)", () => {
    const id = timeOrderedId();
    expect(Uuid.parse(id)).toBe(id);
  });
});
