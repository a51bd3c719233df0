import type { Config } from '../config.ts';
import { AuditLog } from '../domain/audit.ts';
import type { Clock } from '../lib/clock.ts';
import type { Logger } from '../logger.ts';
import { auditEventRoutes } from '../routes/audit-events.ts';
import type { AuditStore } from '../store/audit.ts';
import type { Feature } from './feature.ts';

/**
 * Audit events (contract §17): the stores write each entry with the change it records; this feature
 * reads them back (`GET /v1/audit-events`) and retains them (`AUDIT_RETENTION_DAYS`, one process at a
 * time). Its `log` is also what the audit-trail middleware and the console record through.
 */
export function auditEventsFeature(deps: {
  store: AuditStore;
  clock: Clock;
  log: Logger;
  config: Pick<Config, 'AUDIT_RETENTION_DAYS'>;
  /** Whether this process runs the retention sweep now (one process at a time on one database). */
  lead: () => Promise<boolean>;
}): Feature & { log: AuditLog } {
  const log = new AuditLog({ store: deps.store, clock: deps.clock, log: deps.log, retentionDays: deps.config.AUDIT_RETENTION_DAYS, lead: deps.lead });
  return { name: 'audit-events', log, routes: auditEventRoutes, workers: [log] };
}
