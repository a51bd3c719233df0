import type { Context } from 'hono';
import type { AppEnv, RouteContext } from './env.ts';
import type { RouteDoc } from './openapi.ts';

/** Registers a handler and its OpenAPI description together, so every route is documented. */
export function route(ctx: RouteContext, doc: RouteDoc, handler: (c: Context<AppEnv>) => Promise<Response> | Response): void {
  ctx.docs.add(doc);
  ctx.app.on(doc.method.toUpperCase(), doc.path, handler);
}
