/** One installation's writes of the last hour (oldest first) and its pause. */
type Lane = { pausedUntil: number; lastHour: number[] };

const MINUTE_MS = 60_000;
const HOUR_MS = 3_600_000;

/**
 * The pace of content-creating GitHub calls (deployments, statuses, check runs), per App
 * installation: GitHub's secondary limits count per actor, and an installation token acts as its
 * installation. At most `perMinute` calls in any minute and `perHour` in any hour (GitHub's limits
 * are 80 and 500): a burst below the limits goes at once, the rest waits for the window to slide.
 * A rate-limit answer pauses that installation's calls until GitHub said, never the others'.
 */
export class GithubPace {
  readonly #perMinute: number;
  readonly #perHour: number;
  readonly #now: () => number;
  readonly #lanes = new Map<number, Lane>();

  constructor(limits: { perMinute: number; perHour: number }, now: () => number = Date.now) {
    this.#perMinute = limits.perMinute;
    this.#perHour = limits.perHour;
    this.#now = now;
  }

  /** How long to wait before the installation's next call may go; the call's slot is taken when this answers 0. */
  take(installationId: number): number {
    const now = this.#now();
    const lane = this.#lane(installationId);
    const { lastHour } = lane;
    while (lastHour.length > 0 && lastHour[0]! <= now - HOUR_MS) lastHour.shift();
    // The call that must leave a window before one more fits in it: the perMinute-th newest, the perHour-th newest.
    const inLastMinute = lastHour.length - firstAfter(lastHour, now - MINUTE_MS);
    const minuteFreesAt = inLastMinute >= this.#perMinute ? lastHour[lastHour.length - this.#perMinute]! + MINUTE_MS : 0;
    const hourFreesAt = lastHour.length >= this.#perHour ? lastHour[lastHour.length - this.#perHour]! + HOUR_MS : 0;
    const at = Math.max(lane.pausedUntil, minuteFreesAt, hourFreesAt);
    if (at > now) return at - now;
    lastHour.push(now);
    return 0;
  }

  /** GitHub asked this installation to wait until `untilMs`. */
  pause(installationId: number, untilMs: number): void {
    const lane = this.#lane(installationId);
    lane.pausedUntil = Math.max(lane.pausedUntil, untilMs);
  }

  /** Until when the installation is paused (0: not paused). */
  pausedUntil(installationId: number): number {
    return this.#lanes.get(installationId)?.pausedUntil ?? 0;
  }

  #lane(installationId: number): Lane {
    let lane = this.#lanes.get(installationId);
    if (!lane) {
      lane = { pausedUntil: 0, lastHour: [] };
      this.#lanes.set(installationId, lane);
    }
    return lane;
  }
}

/** The index of the first time after `after` in ascending `times` (binary search: up to 500 entries). */
function firstAfter(times: number[], after: number): number {
  let low = 0;
  let high = times.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (times[middle]! > after) high = middle;
    else low = middle + 1;
  }
  return low;
}
