import type { Clock } from '../lib/clock.ts';
import type { WorkLease } from '../store/types.ts';

/**
 * A lease on work for `owner` (this server process) from now until `leaseMs` later
 * (`PIPELINE_LEASE_MS`): what the pipeline, the delivery worker and uploads claim and renew with.
 */
export function leaseFromNow(clock: Clock, owner: string, leaseMs: number): WorkLease {
  const now = clock.now();
  return { owner, now, until: new Date(Date.parse(now) + leaseMs).toISOString() };
}
