import type { Context } from 'hono';
import type { AppEnv, RouteContext } from './env.ts';
import type { RouteDoc } from './openapi.ts';
import { declareAuth, type RouteAuth } from './route-auth.ts';

type Handler = (c: Context<AppEnv>) => Promise<Response> | Response;

/** Registers a handler and its OpenAPI description together, so every route is documented and declares its auth. */
export function route(ctx: RouteContext, doc: RouteDoc, handler: Handler): void {
  declareAuth(handler, doc.auth, `${doc.method.toUpperCase()} ${doc.path}`);
  ctx.docs.add(doc);
  ctx.app.on(doc.method.toUpperCase(), doc.path, handler);
}

/**
 * Registers a route that is an HTML page rather than an API operation (not in the OpenAPI
 * document), with its auth declared all the same.
 */
export function page(ctx: RouteContext, declaration: { method: 'get' | 'post'; path: string; auth: RouteAuth }, handler: Handler): void {
  declareAuth(handler, declaration.auth, `${declaration.method.toUpperCase()} ${declaration.path}`);
  ctx.app.on(declaration.method.toUpperCase(), declaration.path, handler);
}
