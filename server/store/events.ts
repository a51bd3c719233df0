import type { Row } from './db.ts';
import { SqlStore } from './sql-store.ts';

/** A workspace's receiver of outgoing events, as stored (the secret encrypted). */
export type EventSubscriptionRecord = {
  id: string;
  tenant_id: string;
  url: string;
  events: string[];
  format: 'standard' | 'slack';
  secret_enc: string;
  created_at: string;
};

/** One event for one subscription, from the outbox the triggers of migration 025 fill. */
export type EventDelivery = {
  id: number;
  subscription_id: string;
  deployment_id: string;
  revision_id: string | null;
  event: string;
  status: string | null;
  attempts: number;
  done_at: string | null;
  outcome: string | null;
  created_at: string;
};

export type DeliveryAttempt = { attempt: number; response_status: number | null; error: string | null; attempted_at: string };

/** Storage of outgoing-event subscriptions and their outbox. */
export interface EventStore {
  create(record: EventSubscriptionRecord): Promise<void>;
  list(tenantId: string): Promise<EventSubscriptionRecord[]>;
  get(tenantId: string, id: string): Promise<EventSubscriptionRecord | null>;
  /** Removes the subscription and its unsent deliveries; false when the workspace has none by that id. */
  remove(tenantId: string, id: string): Promise<boolean>;
  /** The first pending delivery of each (subscription, deployment) that is due: later ones wait for it. */
  due(now: string, limit: number): Promise<Array<EventDelivery & { subscription: EventSubscriptionRecord }>>;
  deliveries(subscriptionId: string, limit: number): Promise<Array<EventDelivery & { attempts_made: DeliveryAttempt[] }>>;
  /** Records an attempt; `done` finishes the delivery, else it is due again at `nextAttemptAt`. */
  recordAttempt(id: number, attempt: DeliveryAttempt, outcome: string, done: boolean, nextAttemptAt: string | null): Promise<void>;
}

const DUE = `SELECT o.id, o.subscription_id, o.deployment_id, o.revision_id, o.event, o.status, o.attempts, o.done_at, o.outcome, o.created_at,
    s.tenant_id, s.url, s.events, s.format, s.secret_enc, s.created_at AS subscription_created_at
  FROM event_deliveries o JOIN event_subscriptions s ON s.id = o.subscription_id
  WHERE o.done_at IS NULL
    AND o.id = (SELECT MIN(f.id) FROM event_deliveries f WHERE f.subscription_id = o.subscription_id AND f.deployment_id = o.deployment_id AND f.done_at IS NULL)
    AND (o.next_attempt_at IS NULL OR o.next_attempt_at <= ?)
  ORDER BY o.id LIMIT ?`;

function toSubscription(row: Row): EventSubscriptionRecord {
  return {
    id: row.id as string,
    tenant_id: row.tenant_id as string,
    url: row.url as string,
    events: JSON.parse(row.events as string) as string[],
    format: row.format as EventSubscriptionRecord['format'],
    secret_enc: row.secret_enc as string,
    created_at: row.created_at as string,
  };
}

function toDelivery(row: Row): EventDelivery {
  return {
    id: Number(row.id),
    subscription_id: row.subscription_id as string,
    deployment_id: row.deployment_id as string,
    revision_id: (row.revision_id as string | null) ?? null,
    event: row.event as string,
    status: (row.status as string | null) ?? null,
    attempts: Number(row.attempts),
    done_at: (row.done_at as string | null) ?? null,
    outcome: (row.outcome as string | null) ?? null,
    created_at: row.created_at as string,
  };
}

/** Outgoing events' subscriptions and outbox, on either database. */
export class SqlEventStore extends SqlStore implements EventStore {
  async create(r: EventSubscriptionRecord): Promise<void> {
    await this.sql.run('INSERT INTO event_subscriptions (id, tenant_id, url, events, format, secret_enc, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
      r.id,
      r.tenant_id,
      r.url,
      JSON.stringify(r.events),
      r.format,
      r.secret_enc,
      r.created_at,
    ]);
  }

  async list(tenantId: string): Promise<EventSubscriptionRecord[]> {
    return (await this.sql.rows('SELECT * FROM event_subscriptions WHERE tenant_id = ? ORDER BY created_at, id', [tenantId])).map(toSubscription);
  }

  get(tenantId: string, id: string): Promise<EventSubscriptionRecord | null> {
    return this.first(toSubscription, 'SELECT * FROM event_subscriptions WHERE tenant_id = ? AND id = ?', [tenantId, id]);
  }

  async remove(tenantId: string, id: string): Promise<boolean> {
    return this.sql.tx(async (tx) => {
      const removed = await tx.run('DELETE FROM event_subscriptions WHERE tenant_id = ? AND id = ?', [tenantId, id]);
      if (removed === 0) return false;
      await tx.run('DELETE FROM event_delivery_attempts WHERE delivery_id IN (SELECT id FROM event_deliveries WHERE subscription_id = ?)', [id]);
      await tx.run('DELETE FROM event_deliveries WHERE subscription_id = ?', [id]);
      return true;
    });
  }

  async due(now: string, limit: number): Promise<Array<EventDelivery & { subscription: EventSubscriptionRecord }>> {
    return (await this.sql.rows(DUE, [now, limit])).map((row) => ({
      ...toDelivery(row),
      subscription: toSubscription({ ...row, id: row.subscription_id, created_at: row.subscription_created_at }),
    }));
  }

  async deliveries(subscriptionId: string, limit: number): Promise<Array<EventDelivery & { attempts_made: DeliveryAttempt[] }>> {
    const rows = (await this.sql.rows('SELECT * FROM event_deliveries WHERE subscription_id = ? ORDER BY id DESC LIMIT ?', [subscriptionId, limit])).map(
      toDelivery,
    );
    if (rows.length === 0) return [];
    const attempts = await this.sql.rows(
      `SELECT delivery_id, attempt, response_status, error, attempted_at FROM event_delivery_attempts
       WHERE delivery_id IN (${rows.map(() => '?').join(', ')}) ORDER BY delivery_id, attempt`,
      rows.map((r) => r.id),
    );
    return rows.map((r) => ({
      ...r,
      attempts_made: attempts
        .filter((a) => Number(a.delivery_id) === r.id)
        .map((a) => ({
          attempt: Number(a.attempt),
          response_status: a.response_status === null ? null : Number(a.response_status),
          error: (a.error as string | null) ?? null,
          attempted_at: a.attempted_at as string,
        })),
    }));
  }

  async recordAttempt(id: number, attempt: DeliveryAttempt, outcome: string, done: boolean, nextAttemptAt: string | null): Promise<void> {
    await this.sql.tx(async (tx) => {
      await tx.run('INSERT INTO event_delivery_attempts (delivery_id, attempt, response_status, error, attempted_at) VALUES (?, ?, ?, ?, ?)', [
        id,
        attempt.attempt,
        attempt.response_status,
        attempt.error,
        attempt.attempted_at,
      ]);
      await tx.run('UPDATE event_deliveries SET attempts = ?, outcome = ?, done_at = ?, next_attempt_at = ? WHERE id = ?', [
        attempt.attempt,
        outcome,
        done ? attempt.attempted_at : null,
        nextAttemptAt,
        id,
      ]);
    });
  }
}
