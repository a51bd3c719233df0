import type { SchemaDialect } from '../db.ts';

/** Subscriptions of the deployment's workspace that want `event` (or every event, `*`). */
const subscribers = (event: string, tenant: string) =>
  `FROM event_subscriptions s WHERE s.tenant_id = ${tenant} AND (s.events LIKE '%"${event}"%' OR s.events LIKE '%"*"%')`;

const insertDelivery = (event: string, deployment: string, revision: string, status: string, tenant: string) =>
  `INSERT INTO event_deliveries (subscription_id, deployment_id, revision_id, event, status, created_at)
   SELECT s.id, ${deployment}, ${revision}, '${event}', ${status}, ${'$NOW'} ${subscribers(event, tenant)}`;

/**
 * Outgoing events (contract §17).
 *
 * - `event_subscriptions`: a workspace's receivers; the `whsec_` signing secret is encrypted.
 * - `event_deliveries`: the outbox: one row per (subscription, event), written by triggers in the
 *   very transaction of the change (as the GitHub status outbox of migration 017), so no store path
 *   can change a deployment and forget the event. The sender sends them in order per
 *   (subscription, deployment), retrying for 24 hours.
 * - `event_delivery_attempts`: each attempt's answer, for `GET …/deliveries`.
 */
export default (d: SchemaDialect) => {
  const now = (sql: string) => sql.replaceAll('$NOW', d.nowText);
  return `
CREATE TABLE event_subscriptions (
  id TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  url TEXT NOT NULL,
  events TEXT NOT NULL,
  format TEXT NOT NULL,
  secret_enc TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE INDEX event_subscriptions_by_tenant ON event_subscriptions (tenant_id);

CREATE TABLE event_deliveries (
  id ${d.serialKey},
  subscription_id TEXT NOT NULL,
  deployment_id TEXT NOT NULL,
  revision_id TEXT,
  event TEXT NOT NULL,
  status TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at TEXT,
  done_at TEXT,
  outcome TEXT,
  created_at TEXT NOT NULL
);
CREATE INDEX event_deliveries_pending ON event_deliveries (subscription_id, deployment_id, id) WHERE done_at IS NULL;

CREATE TABLE event_delivery_attempts (
  delivery_id ${d.bigint} NOT NULL,
  attempt INTEGER NOT NULL,
  response_status INTEGER,
  error TEXT,
  attempted_at TEXT NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);

${d.afterRowTrigger(
  'event_deliveries_deployment_created',
  'INSERT',
  'deployments',
  `EXISTS (SELECT 1 ${subscribers('deployment.created', 'NEW.tenant_id')})`,
  now(insertDelivery('deployment.created', 'NEW.id', 'NULL', 'NEW.status', 'NEW.tenant_id')),
)}

${d.afterRowTrigger(
  'event_deliveries_deployment_deleted',
  'UPDATE OF status',
  'deployments',
  `NEW.status = 'AWAITING_DELETE' AND OLD.status <> 'AWAITING_DELETE' AND EXISTS (SELECT 1 ${subscribers('deployment.deleted', 'NEW.tenant_id')})`,
  now(insertDelivery('deployment.deleted', 'NEW.id', 'NULL', 'NEW.status', 'NEW.tenant_id')),
)}

${d.afterRowTrigger(
  'event_deliveries_revision_status_changed',
  'UPDATE OF status',
  'revisions',
  `NEW.status <> OLD.status AND EXISTS (SELECT 1 ${subscribers('revision.status_changed', 'NEW.tenant_id')})`,
  now(insertDelivery('revision.status_changed', 'NEW.deployment_id', 'NEW.id', 'NEW.status', 'NEW.tenant_id')),
)}
`;
};
