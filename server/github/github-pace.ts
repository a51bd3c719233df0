/**
 * One pace for every content-creating GitHub call this server makes (statuses, deployments):
 * at most `perMinute`, spaced evenly, so a burst of revisions never trips GitHub's secondary rate
 * limit (about 80 a minute). A `Retry-After` or an exhausted `x-ratelimit-remaining` pauses all
 * calls until GitHub says, since those limits are per App installation, not per repository.
 */
export class GithubPace {
  readonly #gapMs: number;
  readonly #now: () => number;
  #nextAt = 0;
  #pausedUntil = 0;

  constructor(perMinute: number, now: () => number = Date.now) {
    this.#gapMs = 60_000 / perMinute;
    this.#now = now;
  }

  /** How long to wait before the next call may go; the call's slot is taken when this answers 0. */
  take(): number {
    const now = this.#now();
    const at = Math.max(this.#nextAt, this.#pausedUntil);
    if (at > now) return at - now;
    this.#nextAt = now + this.#gapMs;
    return 0;
  }

  /** GitHub asked for a pause (`Retry-After` seconds, or `x-ratelimit-reset` epoch seconds); answers until when. */
  pauseFrom(headers: Headers): number | null {
    const now = this.#now();
    const retryAfter = headers.get('retry-after');
    let until: number | null = null;
    if (retryAfter !== null && /^\d+$/.test(retryAfter.trim())) until = now + Number(retryAfter) * 1000;
    else if (headers.get('x-ratelimit-remaining') === '0' && /^\d+$/.test(headers.get('x-ratelimit-reset') ?? ''))
      until = Number(headers.get('x-ratelimit-reset')) * 1000;
    if (until === null) return null;
    // Never longer than an hour: a wrong header must not silence GitHub updates for a day.
    this.#pausedUntil = Math.max(this.#pausedUntil, Math.min(until, now + 3_600_000));
    return this.#pausedUntil;
  }
}
