/** How often a live server may be restarted: at most 3 times in 10 minutes (contract §15). */
export const MAX_RESTARTS = 3;
export const RESTART_WINDOW_MS = 10 * 60_000;

/**
 * The restarts one live revision's server has left: each exit after `DEPLOYED` is counted, and
 * the exit that would be the fourth restart within the window is the end (the revision is then
 * reported failed instead). Exits older than the window no longer count, so a server that falls
 * over once a day is restarted every time.
 */
export class RestartBudget {
  readonly #exits: number[] = [];

  /** Counts an exit at `now`: the restart it may have (1…3), or null when none is left. */
  exit(now: number): number | null {
    this.#exits.push(now);
    while (this.#exits.length > 0 && now - this.#exits[0]! > RESTART_WINDOW_MS) this.#exits.shift();
    return this.#exits.length > MAX_RESTARTS ? null : this.#exits.length;
  }
}
