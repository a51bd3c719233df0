import { z } from 'zod';
import { ErrorDetail } from '../../shared/schemas/common.ts';
import type { RouteContext } from '../http/env.ts';
import { route } from '../http/route.ts';

export function healthRoutes(ctx: RouteContext): void {
  const Status = z.object({ status: z.string() });
  route(ctx, { method: 'get', path: '/healthz', summary: 'The server accepts requests', tag: 'health', auth: false, response: { status: 200, schema: Status } }, (c) =>
    c.json({ status: 'ok' }),
  );
  route(ctx, { method: 'get', path: '/readyz', summary: 'The database answers', tag: 'health', auth: false, response: { status: 200, schema: Status }, responses: [{ status: 503, schema: ErrorDetail, description: 'The database does not answer' }] }, async (c) => {
    const ok = await ctx.services.store.ping().catch(() => false);
    return ok ? c.json({ status: 'ok' }) : c.json({ detail: 'The database does not answer.' }, 503);
  });
  let document: Record<string, unknown> | undefined;
  route(ctx, { method: 'get', path: '/openapi.json', summary: 'This OpenAPI document', tag: 'health', auth: false, response: { status: 200, schema: z.looseObject({ openapi: z.string() }), description: 'An OpenAPI 3.1 document' } }, (c) => {
    document ??= ctx.docs.document();
    return c.json(document);
  });
}
