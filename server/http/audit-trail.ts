import type { Context, MiddlewareHandler } from 'hono';
import type { AuditLog } from '../domain/audit.ts';
import type { Principal } from '../domain/auth.ts';
import type { AuditEntry, PendingAudit } from '../lib/request-scope.ts';
import { requestScope } from '../lib/request-scope.ts';
import type { Logger } from '../logger.ts';
import type { AppEnv } from './env.ts';
import { clientAddress, requestHeader } from './node-request.ts';
import { routeTemplate } from './request-id.ts';

/** Verbs a route may end with (`…/{id}/redeploy`): the action on the object named before them. */
const VERBS = new Set(['redeploy', 'interrupt', 'authenticate']);
/** Path segments whose resource reads better under another name. */
const RESOURCE_NAMES: Record<string, string> = { github: 'integration', 'github-trust': 'github_trust_entry', metadata: 'token' };
/** Objects of the organization as a whole: entries an organization key makes on them are not shown to workspace keys. */
const ORGANIZATION_RESOURCES = new Set(['workspace', 'api_key']);

/**
 * Drafts the audit entry of every state-changing request made with an API key, before the route
 * runs; the store writes it in the first transaction of the request that changes something
 * (`pendingAudit`), so a change and its entry commit together or not at all. A request that
 * changed nothing (refused, or nothing to do) gets its entry written here once it has answered,
 * with its outcome and status.
 */
export function auditTrail(audit: AuditLog, log: Logger): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const method = c.req.method;
    if (method === 'GET' || method === 'HEAD' || method === 'OPTIONS') return next();
    const principal = c.get('principal') as Principal | undefined;
    const scope = requestScope();
    const template = routeTemplate(c);
    // Without a key's principal there is no organization to show the entry to: the paths that take
    // no API key (the agents' protocol, webhooks, the OAuth callback, uploads) and refused keys.
    if (!principal || !scope || !template) return next();
    const pending: PendingAudit = { entry: draft(c, principal, template, scope.requestId), state: 'pending', subjectNamed: false };
    scope.audit = pending;
    await next();
    const written = pending.state === 'written';
    pending.state = 'closed';
    if (written) return;
    const status = c.res.status;
    pending.entry.outcome = status < 400 ? 'succeeded' : 'failed';
    pending.entry.status = status < 400 ? null : status;
    await audit
      .record(pending.entry)
      .catch((error: unknown) => log.error('audit: could not record an entry', { error: String(error), action: pending.entry.action }));
  };
}

/**
 * What an entry takes from its route alone (method and template): worked out once per route, not
 * on every request (splits and regular expressions, a few microseconds of every change's CPU).
 */
type RouteAudit = {
  action: string;
  resource: string;
  /** The index of the path segment naming the object acted on, or -1. */
  resourceAt: number;
  /** The index of the `:workspace_id` segment, or -1. */
  workspaceAt: number;
  route: string;
};

const routeAudits = new Map<string, RouteAudit>();

function routeAudit(method: string, template: string): RouteAudit {
  const key = `${method} ${template}`;
  let known = routeAudits.get(key);
  if (!known) routeAudits.set(key, (known = deriveRouteAudit(method, template)));
  return known;
}

function deriveRouteAudit(method: string, template: string): RouteAudit {
  const segments = template.split('/').filter(Boolean);
  const last = segments.length - 1;
  const isParam = (i: number) => segments[i]?.startsWith(':') ?? false;
  let action = method === 'DELETE' ? 'delete' : method === 'POST' ? 'create' : 'update';
  let resource = segments[last] ?? '';
  let resourceAt = -1;
  if (isParam(last)) {
    // `…/deployments/{id}`: the object the path names.
    resource = segments[last - 1] ?? '';
    resourceAt = last;
    if (method === 'POST') action = 'update';
  } else if (isParam(last - 1) && (VERBS.has(segments[last]!) || method !== 'POST')) {
    // `…/revisions/{id}/interrupt`, `PATCH …/tokens/{id}/metadata`: an action on the object named before.
    if (VERBS.has(segments[last]!)) action = segments[last]!.replace(/-/g, '_');
    resource = segments[last - 2] ?? '';
    resourceAt = last - 1;
  } else if (isParam(last - 1)) {
    // `POST …/listeners/{id}/tokens`: something made under the object the path names.
    resourceAt = last - 1;
  }
  return {
    action,
    resource: RESOURCE_NAMES[resource] ?? singular(resource),
    resourceAt,
    workspaceAt: segments.indexOf(':workspace_id'),
    route: `${method} ${template.replace(/:(\w+)/g, '{$1}')}`,
  };
}

function draft(c: Context, principal: Principal, template: string, requestId: string): AuditEntry {
  const method = c.req.method;
  const { action, resource, resourceAt, workspaceAt, route } = routeAudit(method, template);
  // The path's own segments, aligned with the template's: a middleware's `c.req.param()` sees only its own match.
  const values = resourceAt >= 0 || workspaceAt >= 0 ? c.req.path.split('/').filter(Boolean) : [];
  const valueOf = (i: number) => (i < 0 || values[i] === undefined ? null : decoded(values[i]!));
  const workspaceParam = valueOf(workspaceAt);
  // A workspace key's entries stay in its own workspace, whichever workspace its request named.
  const workspaceId = !principal.organizationScoped
    ? principal.workspaceId
    : (workspaceParam ?? (ORGANIZATION_RESOURCES.has(resource) ? null : principal.workspaceId));
  return {
    id: crypto.randomUUID(),
    organization_id: principal.organizationId,
    workspace_id: workspaceId,
    actor_kind: 'api_key',
    actor_id: principal.keyId,
    actor_scope: principal.organizationScoped ? 'organization' : 'workspace',
    address: clientAddress(c) ?? null,
    user_agent: requestHeader(c, 'user-agent')?.slice(0, 512) ?? null,
    action,
    resource_type: resource,
    // The last object the path names stands until the domain names what it made (`auditSubject`).
    resource_id: valueOf(resourceAt),
    route,
    fields: [],
    outcome: 'succeeded',
    status: null,
    request_id: requestId,
    created_at: new Date().toISOString(),
  };
}

/** A path segment as text; one that is not valid percent-encoding is kept as it came. */
function decoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

function singular(segment: string): string {
  return segment.replace(/-/g, '_').replace(/s$/, '');
}
