import type { Context } from 'hono';
import type { z } from 'zod';
import type { AppEnv, RouteContext } from './env.ts';
import type { RouteDoc } from './openapi.ts';
import { declareAuth, type RouteAuth } from './route-auth.ts';
import { pathParam, readJson, validate } from './validation.ts';

/** `/v2/deployments/:deployment_id/revisions/:revision_id` → `'deployment_id' | 'revision_id'`. */
type ParamNames<Path extends string> = string extends Path
  ? string
  : Path extends `${string}:${infer Name}/${infer Rest}`
    ? Name | ParamNames<`/${Rest}`>
    : Path extends `${string}:${infer Name}`
      ? Name
      : never;

type ParamOutput<D extends RouteDoc, Name extends string> = D extends { pathParams: infer Given }
  ? Name extends keyof Given
    ? Given[Name] extends z.ZodType
      ? z.output<Given[Name]>
      : string
    : string
  : string;

/**
 * What `route()` hands its handler, validated from the route's own doc: `params` (every `:name` of
 * the path: a lower-cased uuid, or the doc's `pathParams` schema's output), `query` and `body` (the
 * doc's schemas' outputs; `undefined` where the doc declares none). A route whose doc says
 * `ownInput` reads its input itself and gets nothing.
 */
export type RouteInput<D extends RouteDoc> = D extends { ownInput: string }
  ? undefined
  : {
      params: { [Name in ParamNames<D['path']>]: ParamOutput<D, Name> };
      query: D extends { query: infer Q extends z.ZodType } ? z.output<Q> : undefined;
      body: D extends { body: infer B extends z.ZodType } ? z.output<B> : undefined;
    };

type Handler<D extends RouteDoc, Caller> = (c: Context<AppEnv>, input: RouteInput<D>, caller: Caller) => Promise<Response> | Response;

/**
 * Registers a handler and its OpenAPI description together: every route is documented, declares
 * its auth, and is handed the input its doc declares, validated (so a route cannot document one
 * schema and read another). Checks run in this order: the auth middleware (api-key routes), then
 * `checkCaller` (what the route itself asks of its caller: a listener token, an organization-scoped
 * key), then path params, query and body, so a caller that may not use the route never gets its
 * body parsed.
 */
export function route<const D extends RouteDoc, Caller = undefined>(
  ctx: RouteContext,
  doc: D,
  handler: Handler<D, Caller>,
  checkCaller?: (c: Context<AppEnv>) => Promise<Caller> | Caller,
): void {
  const where = `${doc.method.toUpperCase()} ${doc.path}`;
  const paramNames = [...doc.path.matchAll(/:(\w+)/g)].map((match) => match[1]!);
  const run = async (c: Context<AppEnv>) => {
    const caller = (checkCaller ? await checkCaller(c) : undefined) as Caller;
    return handler(c, (doc.ownInput === undefined ? await readInput(c, doc, paramNames) : undefined) as RouteInput<D>, caller);
  };
  declareAuth(run, doc.auth, where);
  ctx.docs.add(doc);
  ctx.app.on(doc.method.toUpperCase(), doc.path, run);
}

async function readInput(c: Context<AppEnv>, doc: RouteDoc, paramNames: string[]): Promise<{ params: Record<string, unknown>; query: unknown; body: unknown }> {
  const params: Record<string, unknown> = {};
  for (const name of paramNames) params[name] = pathParam(c, name, doc.pathParams?.[name]);
  const query = doc.query ? validate(doc.query, c.req.query(), 'query') : undefined;
  let body: unknown;
  if (doc.body)
    body = doc.bodyReading?.emptyBody === 'empty-object' && hasNoBody(c) ? validate(doc.body, {}, 'body') : await readJson(c, doc.body, doc.bodyReading);
  return { params, query, body };
}

/** No Content-Type and no length: a client that sent no body at all (not an empty JSON text, which is 422). */
function hasNoBody(c: Context): boolean {
  return !c.req.header('content-type') && (c.req.header('content-length') ?? '0') === '0';
}

/**
 * Registers a route that is an HTML page rather than an API operation (not in the OpenAPI
 * document), with its auth declared all the same.
 */
export function page(
  ctx: RouteContext,
  declaration: { method: 'get' | 'post'; path: string; auth: RouteAuth },
  handler: (c: Context<AppEnv>) => Promise<Response> | Response,
): void {
  declareAuth(handler, declaration.auth, `${declaration.method.toUpperCase()} ${declaration.path}`);
  ctx.app.on(declaration.method.toUpperCase(), declaration.path, handler);
}
