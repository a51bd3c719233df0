import { AsyncLocalStorage } from 'node:async_hooks';

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

/** What one request carries through every await: its id (in every log line) and its pending audit entry. */
export type RequestScope = { requestId: string; audit?: PendingAudit };

const scopes = new AsyncLocalStorage<RequestScope>();

/** Runs `work` (and everything it starts) inside `scope`. */
export function runInRequestScope<T>(scope: RequestScope, work: () => T): T {
  return scopes.run(scope, work);
}

/** The scope of the request being served, if any. */
export function requestScope(): RequestScope | undefined {
  return scopes.getStore();
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
  const fields: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    if (value !== null && typeof value === 'object' && !Array.isArray(value) && key !== 'secrets') {
      const inner = Object.keys(value);
      if (inner.length === 0) fields.push(key);
      for (const name of inner) fields.push(`${key}.${name}`);
    } else fields.push(key);
    if (fields.length >= MAX_FIELDS) break;
  }
  audit.entry.fields = fields.slice(0, MAX_FIELDS).map((name) => name.slice(0, 100));
}

const MAX_FIELDS = 50;
