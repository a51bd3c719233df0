import { GithubApiError } from './github-api.ts';

/** GitHub's floor for a secondary limit that names no time: "wait for at least one minute". */
const SECONDARY_FLOOR_MS = 60_000;
/** No wait is longer: a wrong header must not silence GitHub updates for a day. */
const LONGEST_WAIT_MS = 3_600_000;

/**
 * Whether GitHub refused a call because of a primary or secondary rate limit, not for good: a 429,
 * or a 403 with `retry-after`, `x-ratelimit-remaining: 0`, or a message naming the rate limit
 * (GitHub's secondary-limit 403 may carry no header at all).
 */
export function isRateLimited(error: unknown): error is GithubApiError {
  if (!(error instanceof GithubApiError)) return false;
  if (error.status === 429) return true;
  if (error.status !== 403) return false;
  return error.headers.has('retry-after') || error.headers.get('x-ratelimit-remaining') === '0' || /rate limit/i.test(error.message);
}

/**
 * When a rate-limited call may be made again, by GitHub's rules
 * (docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately):
 * `retry-after` seconds; else, with `x-ratelimit-remaining: 0`, the `x-ratelimit-reset` epoch;
 * else at least a minute, doubling with each attempt that hit the limit again.
 */
export function rateLimitedUntil(headers: Headers, attempts: number, nowMs: number): number {
  const retryAfter = headers.get('retry-after')?.trim();
  const reset = headers.get('x-ratelimit-reset')?.trim();
  let until: number;
  if (retryAfter && /^\d+$/.test(retryAfter)) until = nowMs + Number(retryAfter) * 1000;
  else if (headers.get('x-ratelimit-remaining') === '0' && reset && /^\d+$/.test(reset)) until = Number(reset) * 1000;
  else until = nowMs + SECONDARY_FLOOR_MS * 2 ** Math.min(Math.max(attempts, 0), 6);
  return Math.min(Math.max(until, nowMs), nowMs + LONGEST_WAIT_MS);
}
