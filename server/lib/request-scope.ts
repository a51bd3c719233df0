import { AsyncLocalStorage } from 'node:async_hooks';
import { validTraceparent } from '../../shared/otel.ts';

/**
 * One audit entry as it is stored (`audit_events`): who, from where, what, and the outcome. Built
 * by the HTTP layer before the change runs, completed by the domain (the id of what it created)
 * and written by the store inside the transaction of the change.
 */
export type AuditEntry = {
  id: string;
  organization_id: string;
  /** Null for what belongs to the organization as a whole (a workspace created, an organization key). */
  workspace_id: string | null;
  actor_kind: 'api_key' | 'console_session' | 'agent' | 'github_delivery';
  actor_id: string;
  /** For an API key: `organization` or `workspace` (what it may act for). */
  actor_scope: string | null;
  address: string | null;
  user_agent: string | null;
  /** `create`, `update`, `delete`, or the verb the route ends with (`redeploy`, `interrupt`, `sign_in`). */
  action: string;
  resource_type: string;
  resource_id: string | null;
  /** The route template the change came through (`PATCH /v2/deployments/{deployment_id}`). */
  route: string | null;
  /** Names of the fields the request set (dotted paths), never their values. */
  fields: string[];
  outcome: 'succeeded' | 'failed';
  /** The HTTP status of a refused change; null while it succeeds inside its transaction. */
  status: number | null;
  request_id: string | null;
  created_at: string;
};

/**
 * An audit entry waiting for the transaction of its change. `pending` until a transaction that
 * changed rows writes it (`writing` until that commits, then `written`); `closed` once the request
 * has answered, so work the request started in the background never writes it later.
 */
export type PendingAudit = {
  entry: AuditEntry;
  state: 'pending' | 'writing' | 'written' | 'closed';
  /** Set once the domain has named what the change made (`auditSubject`); the draft's id was the path's. */
  subjectNamed: boolean;
};

/**
 * What one request (or one webhook delivery being processed) carries through every await: its id
 * (in every log line), its pending audit entry, and its trace context.
 */
export type RequestScope = {
  requestId: string;
  audit?: PendingAudit;
  /**
   * The `traceparent` what this work makes is traced under: the request's span when tracing is on,
   * else the caller's own header as sent (checked where it is used), so agents that trace still
   * join the caller's trace. A revision made here keeps it (`currentTraceparent`).
   */
  traceparent?: string;
  /** Who acts when no API key does: the GitHub delivery being processed (its changes are audited as its). */
  actor?: MachineActor;
};

/** An actor other than an API key: a listener's agent (by listener id) or a GitHub delivery (by delivery id). */
export type MachineActor = { kind: 'agent' | 'github_delivery'; id: string };

/** The audit entry of a change made by an agent or a GitHub delivery (no address: no client of ours sent it). */
export function machineAuditEntry(change: {
  actor: MachineActor;
  organizationId: string;
  workspaceId: string;
  action: string;
  resourceType: string;
  resourceId: string;
  fields?: string[];
  now: string;
}): AuditEntry {
  return {
    id: crypto.randomUUID(),
    organization_id: change.organizationId,
    workspace_id: change.workspaceId,
    actor_kind: change.actor.kind,
    actor_id: change.actor.id,
    actor_scope: null,
    address: null,
    user_agent: null,
    action: change.action,
    resource_type: change.resourceType,
    resource_id: change.resourceId,
    route: null,
    fields: change.fields ?? [],
    outcome: 'succeeded',
    status: null,
    request_id: scopes.getStore()?.requestId ?? null,
    created_at: change.now,
  };
}

const scopes = new AsyncLocalStorage<RequestScope>();

/** Runs `work` (and everything it starts) inside `scope`. */
export function runInRequestScope<T>(scope: RequestScope, work: () => T): T {
  return scopes.run(scope, work);
}

/** The scope of the request being served, if any. */
export function requestScope(): RequestScope | undefined {
  return scopes.getStore();
}

/** The trace context of the work being done (see `RequestScope.traceparent`), when it is a valid one. */
export function currentTraceparent(): string | undefined {
  return validTraceparent(scopes.getStore()?.traceparent);
}

/**
 * Runs `work` with `entry` as its pending audit entry, written by the store in the first
 * transaction of `work` that changes rows (as an API request's is); not written when nothing
 * changed. For changes made by someone other than an API key: an agent, a GitHub delivery.
 */
export async function withAuditEntry<T>(entry: AuditEntry, work: () => Promise<T>): Promise<T> {
  const outer = scopes.getStore();
  const pending: PendingAudit = { entry, state: 'pending', subjectNamed: false };
  try {
    return await scopes.run({ ...outer, requestId: outer?.requestId ?? entry.request_id ?? entry.id, audit: pending }, work);
  } finally {
    pending.state = 'closed';
  }
}

/** The audit entry the current request still has to write, if any. */
export function pendingAudit(): PendingAudit | undefined {
  const audit = scopes.getStore()?.audit;
  return audit?.state === 'pending' ? audit : undefined;
}

/**
 * Names the object a change made: its id is known only once the domain has made it. The first
 * name given wins (a create that makes more than one object names the one the request asked for).
 */
export function auditSubject(resourceId: string): void {
  const audit = scopes.getStore()?.audit;
  if (!audit || audit.subjectNamed || audit.state !== 'pending') return;
  audit.entry.resource_id = resourceId;
  audit.subjectNamed = true;
}

/** Records which fields the request's body set (paths, never values), at most two levels deep. */
export function auditFields(body: unknown): void {
  const audit = scopes.getStore()?.audit;
  if (!audit || body === null || typeof body !== 'object' || Array.isArray(body)) return;
  audit.entry.fields = auditFieldPaths(body);
}

/**
 * The field paths an audit entry lists for a body: nested ones dotted, never a value (nor the
 * secrets' names), at most MAX_FIELDS of 100 characters. The bare benchmark server writing the same
 * audit rows (bench/baselines/http-sqlite.mjs) lists them with this too.
 */
export function auditFieldPaths(body: object): string[] {
  const fields: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    if (value !== null && typeof value === 'object' && !Array.isArray(value) && key !== 'secrets') {
      const inner = Object.keys(value);
      if (inner.length === 0) fields.push(key);
      for (const name of inner) fields.push(`${key}.${name}`);
    } else fields.push(key);
    if (fields.length >= MAX_FIELDS) break;
  }
  return fields.slice(0, MAX_FIELDS).map((name) => name.slice(0, 100));
}

const MAX_FIELDS = 50;
