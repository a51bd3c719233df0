import { AuditEventPage, AuditEventQuery } from '../../shared/schemas/audit-event.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

/** `GET /v1/audit-events`: the audit log, read only (no route changes or deletes an entry). */
export function auditEventRoutes(ctx: RouteContext): void {
  route(
    ctx,
    {
      auth: 'api-key',
      method: 'get',
      path: '/v1/audit-events',
      summary: 'List audit entries, newest first',
      description:
        "A workspace key sees its workspace's entries, an organization key every entry of the organization. Filters: `resource_id`, `actor` (a key id), `since` and `until` (RFC 3339); `next_cursor` is the `cursor` of the next page.",
      tag: 'audit',
      query: AuditEventQuery,
      response: { status: 200, schema: AuditEventPage },
    },
    async (c, { query }) => {
      const { entries, next_cursor } = await ctx.services.audit.list(c.get('principal'), query);
      return c.json({ resources: entries, next_cursor });
    },
  );
}
