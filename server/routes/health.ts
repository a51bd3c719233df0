import { z } from 'zod';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';
import { STORAGE_RETRY_AFTER_SECONDS } from '../store/storage-errors.ts';

export function healthRoutes(ctx: RouteContext): void {
  const Status = z.object({ status: z.string() });
  route(ctx, { method: 'get', path: '/healthz', summary: 'The server accepts requests', tag: 'health', auth: false, response: { status: 200, schema: Status } }, (c) =>
    c.json({ status: 'ok' }),
  );
  route(ctx, { method: 'get', path: '/readyz', summary: 'The database takes writes', tag: 'health', auth: false, response: { status: 200, schema: Status } }, async (c) => {
    const state = await ctx.services.readiness.check();
    if (state.ok) return c.json({ status: 'ok' });
    c.header('retry-after', String(STORAGE_RETRY_AFTER_SECONDS));
    return c.json({ detail: state.problem }, 503);
  });
  let document: Record<string, unknown> | undefined;
  route(ctx, { method: 'get', path: '/openapi.json', summary: 'This OpenAPI document', tag: 'health', auth: false, response: { status: 200, schema: null } }, (c) => {
    document ??= ctx.docs.document();
    return c.json(document);
  });
}
