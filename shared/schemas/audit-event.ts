import { z } from 'zod';
import { Timestamp, Uuid } from './common.ts';
import { lazySchema } from './lazy.ts';

/** One entry of the audit log: who changed what, from where, and how it ended (never a secret value). */
export const AuditEvent = lazySchema(() =>
  z.object({
    id: Uuid,
    organization_id: Uuid,
    workspace_id: Uuid.nullable(),
    actor_kind: z.enum(['api_key', 'console_session', 'agent', 'github_delivery']),
    actor_id: z.string(),
    actor_scope: z.string().nullable(),
    address: z.string().nullable(),
    user_agent: z.string().nullable(),
    action: z.string(),
    resource_type: z.string(),
    resource_id: z.string().nullable(),
    route: z.string().nullable(),
    fields: z.array(z.string()),
    outcome: z.enum(['succeeded', 'failed']),
    status: z.number().int().nullable(),
    request_id: z.string().nullable(),
    created_at: Timestamp,
  }),
);
export type AuditEvent = z.infer<typeof AuditEvent>;

/** `GET /v1/audit-events`: filters, and the cursor of the next page. */
export const AuditEventQuery = lazySchema(() =>
  z.strictObject({
    resource_id: z.string().min(1).max(200).optional(),
    actor: z.string().min(1).max(200).optional(),
    since: Timestamp.optional(),
    until: Timestamp.optional(),
    cursor: z.string().min(1).max(100).optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  }),
);
export type AuditEventQuery = z.infer<typeof AuditEventQuery>;

export const AuditEventPage = lazySchema(() => z.object({ resources: z.array(AuditEvent), next_cursor: z.string().nullable() }));
export type AuditEventPage = z.infer<typeof AuditEventPage>;
