/** Time as the domain sees it; tests may pass their own. */
export type Clock = { now(): string };

export const systemClock: Clock = { now: () => new Date().toISOString() };
