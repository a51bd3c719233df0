import { type AuditEntry, machineAuditEntry } from '../lib/request-scope.ts';
import type { Db, Row, Statement } from './db.ts';
import { SqlStore } from './sql-store.ts';
import type { MachineChange } from './types.ts';

/** Which audit entries a reader asks for: one organization's, or one workspace's, newest first. */
export type AuditQuery = {
  organizationId: string;
  /** Only this workspace's entries (a workspace key's view); every entry of the organization when absent. */
  workspaceId?: string;
  resourceId?: string;
  /** An actor's id (a key id, an agent's listener id, a GitHub delivery id). */
  actor?: string;
  since?: string;
  until?: string;
  /** Entries written before this one (`seq`), from the previous page's cursor. */
  beforeSeq?: number;
  limit: number;
};

/**
 * The audit log's storage. Entries are written by the database adapters in the transaction of the
 * change they record (`auditInsert`), or here for what changed nothing (a refused change).
 * Nothing here updates or deletes an entry, except the retention's purge of old ones.
 */
export interface AuditStore {
  record(entry: AuditEntry): Promise<void>;
  list(query: AuditQuery): Promise<{ entries: Array<AuditEntry & { seq: number }>; more: boolean }>;
  /** Removes entries written before `cutoff`; answers how many. */
  purgeBefore(cutoff: string): Promise<number>;
}

const INSERT = `INSERT INTO audit_events (id, organization_id, workspace_id, actor_kind, actor_id, actor_scope, address, user_agent,
    action, resource_type, resource_id, route, fields, outcome, status, request_id, created_at)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/**
 * Whether a statement read with `row`/`rows` may change rows (`UPDATE … RETURNING`, a CTE): only
 * those run in a transaction of their own while an audit entry is pending; plain reads stay one
 * round trip.
 */
export function mayChangeRows(sql: string): boolean {
  return !/^\s*SELECT\b/i.test(sql);
}

/** The statement that writes `entry`: the database adapters add it to the transaction of the change. */
export function auditInsert(entry: AuditEntry): Statement {
  return {
    sql: INSERT,
    params: [
      entry.id,
      entry.organization_id,
      entry.workspace_id,
      entry.actor_kind,
      entry.actor_id,
      entry.actor_scope,
      entry.address,
      entry.user_agent,
      entry.action,
      entry.resource_type,
      entry.resource_id,
      entry.route,
      JSON.stringify(entry.fields),
      entry.outcome,
      entry.status,
      entry.request_id,
      entry.created_at,
    ],
  };
}

/**
 * The audit entry of a change no API key made (a GitHub delivery's), written in the change's own
 * transaction `tx`, in the organization of `workspaceId` (none when the workspace is gone).
 */
export async function auditMachineChange(
  tx: Db,
  workspaceId: string,
  change: MachineChange,
  what: { action: string; resourceType: string; resourceId: string },
): Promise<void> {
  const workspace = await tx.row<{ organization_id: string }>('SELECT organization_id FROM workspaces WHERE id = ?', [workspaceId]);
  if (!workspace) return;
  const { sql, params } = auditInsert(
    machineAuditEntry({ actor: change.actor, organizationId: workspace.organization_id, workspaceId, ...what, now: change.now }),
  );
  await tx.run(sql, params);
}

function toAuditEntry(row: Row): AuditEntry & { seq: number } {
  return {
    seq: Number(row.seq),
    id: row.id as string,
    organization_id: row.organization_id as string,
    workspace_id: (row.workspace_id as string | null) ?? null,
    actor_kind: row.actor_kind as AuditEntry['actor_kind'],
    actor_id: row.actor_id as string,
    actor_scope: (row.actor_scope as string | null) ?? null,
    address: (row.address as string | null) ?? null,
    user_agent: (row.user_agent as string | null) ?? null,
    action: row.action as string,
    resource_type: row.resource_type as string,
    resource_id: (row.resource_id as string | null) ?? null,
    route: (row.route as string | null) ?? null,
    fields: JSON.parse(row.fields as string) as string[],
    outcome: row.outcome as AuditEntry['outcome'],
    status: row.status === null || row.status === undefined ? null : Number(row.status),
    request_id: (row.request_id as string | null) ?? null,
    created_at: row.created_at as string,
  };
}

export class SqlAuditStore extends SqlStore implements AuditStore {
  constructor(db: Db) {
    super(db);
  }

  async record(entry: AuditEntry): Promise<void> {
    const { sql, params } = auditInsert(entry);
    await this.sql.run(sql, params);
  }

  async list(query: AuditQuery): Promise<{ entries: Array<AuditEntry & { seq: number }>; more: boolean }> {
    const where = ['organization_id = @organizationId'];
    const params: Record<string, unknown> = { organizationId: query.organizationId, limit: query.limit + 1 };
    const add = (clause: string, name: string, value: unknown) => {
      if (value === undefined) return;
      where.push(clause);
      params[name] = value;
    };
    add('workspace_id = @workspaceId', 'workspaceId', query.workspaceId);
    add('resource_id = @resourceId', 'resourceId', query.resourceId);
    add('actor_id = @actor', 'actor', query.actor);
    add('created_at >= @since', 'since', query.since);
    add('created_at < @until', 'until', query.until);
    add('seq < @beforeSeq', 'beforeSeq', query.beforeSeq);
    const rows = await this.sql.rows(`SELECT * FROM audit_events WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT @limit`, params);
    const more = rows.length > query.limit;
    return { entries: rows.slice(0, query.limit).map(toAuditEntry), more };
  }

  purgeBefore(cutoff: string): Promise<number> {
    return this.sql.run('DELETE FROM audit_events WHERE created_at < ?', [cutoff]);
  }
}
