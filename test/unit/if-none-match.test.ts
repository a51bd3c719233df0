import { describe, expect, it } from 'vitest';
import { matchesCurrent } from '../../server/http/revision-answer.ts';

// If-None-Match against the revision's ETag, as RFC 9110 compares it (weakly): the fast lane asks
// this of every woken waiter, so its one-strong-tag shortcut must answer as the general rule does.
describe('matchesCurrent (If-None-Match against the current ETag)', () => {
  const etag = '"rev-1.3"';

  it.each([
    ['the same strong tag', '"rev-1.3"', true],
    ['another strong tag', '"rev-1.2"', false],
    ['a strong tag that only starts alike', '"rev-1.3', false],
    ['the same tag, weak', 'W/"rev-1.3"', true],
    ['another tag, weak', 'W/"rev-1.2"', false],
    ['a list holding it', '"rev-1.1", "rev-1.3"', true],
    ['a list holding it weak', '"rev-1.1",W/"rev-1.3"', true],
    ['a list without it', '"rev-1.1", "rev-1.2"', false],
    ['a list of one tag with a trailing comma', '"rev-1.3",', true],
    ['any (*)', '*', true],
    ['any, padded', ' * ', true],
    ['the same tag, padded', ' "rev-1.3" ', true],
  ])('%s: %s', (_case, header, expected) => {
    expect(matchesCurrent(header, etag)).toBe(expected);
  });
});
