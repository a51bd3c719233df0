import type { z } from 'zod';
import { ErrorDetail, HTTPValidationError } from '../../shared/schemas/common.ts';
import { HOSTED_OPERATION_IDS, HOSTED_TAGS, hostedOperationKey } from './hosted-operation-ids.ts';
import { SchemaComponents } from './openapi-schemas.ts';
import type { RouteAuth } from './route-auth.ts';
import type { BodyReading } from './validation.ts';

type Method = 'get' | 'post' | 'patch' | 'delete' | 'put';

/** One answer of a route: status, body schema (`null`: no body) and what else a client may read. */
export type ResponseDoc = {
  status: number;
  schema: z.ZodType | null;
  description?: string;
  /** Media type of the body; `application/json` unless said. */
  contentType?: string;
  /** Response headers a client may read: name → description. */
  headers?: Record<string, string>;
};

/** A request header the route reads (beyond the API key headers, which are security schemes). */
export type HeaderDoc = { name: string; description: string; required?: boolean; schema?: z.ZodType };

export type RouteDoc = {
  method: Method;
  /** Hono-style path, `:param` segments. */
  path: string;
  summary: string;
  /** Longer text for the operation, where the summary cannot say enough. */
  description?: string;
  /** The route group; the groups the hosted API shares take its tag names in the document (`HOSTED_TAGS`). */
  tag: string;
  /**
   * The operation's name in generated clients. Unset: the hosted document's name for the same
   * method and path (`HOSTED_OPERATION_IDS`), so clients generated from either document have the
   * same method names; else one derived from method and path (`get_v2_deployments_deployment_id`).
   */
  operationId?: string;
  /** A JSON body, read and validated by `route()` (`readJson`): the route then also answers 413 and 415. */
  body?: z.ZodType;
  /** How `route()` reads `body`: a size limit, unknown fields refused, NUL kept in text, a missing body as `{}`. */
  bodyReading?: BodyReading;
  /**
   * Media type of the body when it is not `application/json` (e.g. `application/gzip` for an
   * upload: with no `body` schema, the body is documented as bytes of that type; 413/415 still apply).
   */
  bodyContentType?: string;
  /** The query string, validated by `route()` (a repeated key keeps its first value). */
  query?: z.ZodType;
  /** Path parameters that are not uuids (a slug, a name): name → schema, validated by `route()`. The others are uuids. */
  pathParams?: Record<string, z.ZodType>;
  /**
   * Why this route reads its input itself instead of being handed it by `route()`, which then
   * validates nothing (the raw bytes a signature covers, repeated query keys, HTML answers): the
   * escape hatch, served as `x-reads-own-input` so test/unit/route-schema.test.ts can tell it apart.
   */
  ownInput?: string;
  /** Request headers the route reads. */
  headers?: readonly HeaderDoc[];
  /** Status and schema of the success answer; `null` schema for an empty body. */
  response: ResponseDoc;
  /** Other answers the route gives on purpose besides the success and the errors (a 304, a second 2xx, an HTML error page). */
  responses?: readonly ResponseDoc[];
  /**
   * The `{"detail"}` / 422 error statuses the route can answer. Unset: derived from the route's
   * shape (see `derivedErrors`), which is right for a route that `route()` hands its input and
   * that runs behind the API key middleware.
   */
  errors?: readonly number[];
  /** How the caller proves who it is (route-auth.ts): the only place that is decided, for the middleware and this document. */
  auth: RouteAuth;
  /** For a route that takes another credential than an API key: its security requirement (e.g. `[{ ListenerToken: [] }]`). */
  security?: ReadonlyArray<Record<string, readonly string[]>>;
};

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'A rule that needs stored state is broken',
  401: 'Missing, unknown or revoked API key',
  403: 'The key may not do this, or may not use the workspace named in X-Tenant-Id',
  404: 'Not found (or in another workspace)',
  409: 'A name or other unique value is already taken, or the resource is in use',
  413: 'The body is larger than the route accepts',
  415: 'The body is not JSON',
  422: 'The request is malformed (FastAPI-shaped issues)',
  429: 'Too many failed authentication attempts from this address',
  502: 'An upstream service failed',
  503: 'A service this route depends on (the database, a configured secret) is not available',
};

const ERROR_HEADERS: Record<number, Record<string, string>> = {
  429: { 'Retry-After': 'Seconds until another attempt may succeed' },
  503: { 'Retry-After': 'Seconds until the service may be available again (when known)' },
};

/** What each tag groups, for the document's `tags` list (a tag not listed here goes without). */
const TAG_DESCRIPTIONS: Record<string, string> = {
  health: 'Liveness, readiness and this document (no API key)',
  workspaces: "Workspaces of the caller's organization",
  'api-keys': "API keys of the caller's organization",
  'Deployments (v2)': 'Deployments of agent servers, their revisions, pipeline and logs',
  'Listeners (v2)': 'Where deployments run',
  'Integrations (v1)': 'GitHub App installations linked to the workspace',
  'tracing-projects': 'Tracing projects (one per deployment)',
  webhooks: 'GitHub push webhooks and the delivery log',
  'Auth Service (v2)': 'OAuth helper: providers, tokens, authorization flows',
  'github-trust':
    'Keyless CI: GitHub repositories a workspace trusts, and the exchange of their Actions OIDC ID tokens for short-lived keys (docs/keyless-ci.md)',
  'listener-agent': 'The listener-agent protocol: what an agent running where deployments run calls, with its listener token (docs/listener-protocol.md)',
};

/**
 * The error statuses a route of this shape can answer: 401/403 behind the API key, 429 when
 * failed keys from one address are throttled, 503 when the database is failing (every keyed route
 * reads it); 404 when a path or a body names a resource (a body may name one by id or slug:
 * `workspace_id`, `provider`); 400 and 409 when it changes something (GETs only
 * read); 413/415 with a JSON body; 422 when there is any input to validate. Routes added later get
 * a right list without listing it themselves.
 */
export function derivedErrors(route: RouteDoc): number[] {
  const hasPathParams = /:\w+/.test(route.path);
  const errors = new Set<number>();
  if (route.auth === 'api-key') [401, 403, 429, 503].forEach((s) => errors.add(s));
  if (hasPathParams || route.body) errors.add(404);
  if (route.method !== 'get') [400, 409].forEach((s) => errors.add(s));
  if (route.body || route.bodyContentType) [413, 415].forEach((s) => errors.add(s));
  if (route.body || route.query || hasPathParams) errors.add(422);
  return [...errors].sort((a, b) => a - b);
}

/** `get /v2/deployments/:deployment_id/revisions` → `get_v2_deployments_deployment_id_revisions`. */
export function defaultOperationId(method: Method, path: string): string {
  const words = path.split(/[^A-Za-z0-9]+/).filter((word) => word.length > 0);
  return [method, ...words].join('_');
}

/**
 * Collects route descriptions as routes are registered, and turns them into an OpenAPI 3.1
 * document from the same zod schemas the server validates with, so the two cannot drift.
 * The document is built once (`document()` caches it): routes are all registered before the
 * first request.
 */
export class OpenApiRegistry {
  readonly #routes: RouteDoc[] = [];
  readonly #serverUrl: () => string | undefined;
  #document: Record<string, unknown> | undefined;

  /** `serverUrl`: the public address clients reach the server at (`PUBLIC_URL`), asked for when the document is first built. */
  constructor(options: { serverUrl?: () => string | undefined } = {}) {
    this.#serverUrl = options.serverUrl ?? (() => undefined);
  }

  add(route: RouteDoc): void {
    // Two routes with one explicit name would make generated clients clash: a programming error.
    if (route.operationId && this.#routes.some((other) => other.operationId === route.operationId)) {
      throw new Error(`operationId ${route.operationId} is used twice (${route.method} ${route.path})`);
    }
    this.#routes.push(route);
    this.#document = undefined;
  }

  document(): Record<string, unknown> {
    this.#document ??= this.#build();
    return this.#document;
  }

  #build(): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    const tags: string[] = [];
    const schemas = new SchemaComponents();
    // Explicit names first, then the hosted document's, then derived ones: a clash is resolved in
    // favour of the more deliberate name, and every name stays unique.
    const used = new Set<string>();
    const named = this.#routes.map((route) => uniqueId(route.operationId ?? '', used));
    const hosted = this.#routes.map((route, i) => named[i] || uniqueId(HOSTED_OPERATION_IDS[hostedOperationKey(route.method, route.path)] ?? '', used));
    this.#routes.forEach((route, i) => {
      const path = route.path.replace(/:(\w+)/g, '{$1}');
      const tag = HOSTED_TAGS[route.tag] ?? route.tag;
      if (!tags.includes(tag)) tags.push(tag);
      paths[path] ??= {};
      const operationId = hosted[i] || uniqueId(defaultOperationId(route.method, route.path), used);
      paths[path][route.method] = { operationId, tags: [tag], ...operation(route, schemas) };
    });
    const serverUrl = this.#serverUrl();
    return schemas.finish({
      openapi: '3.1.0',
      info: {
        title: 'Deployment control plane',
        version: '0.1.0',
        description:
          'Deployments of agent servers, their revisions and pipeline, listeners, GitHub integrations and webhooks, tracing projects, workspaces and API keys, and the OAuth helper. Generated from the zod schemas the server validates with.',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      ...(serverUrl ? { servers: [{ url: serverUrl, description: 'This server (PUBLIC_URL)' }] } : {}),
      tags: tags.map((name) => ({ name, ...(TAG_DESCRIPTIONS[name] ? { description: TAG_DESCRIPTIONS[name] } : {}) })),
      components: {
        // Component keys must match ^[a-zA-Z0-9.\-_]+$; the seed's names (with spaces) stay in the descriptions.
        securitySchemes: {
          ApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'API Key: an organization- or workspace-scoped API key.' },
          TenantId: {
            type: 'apiKey',
            in: 'header',
            name: 'X-Tenant-Id',
            description: "Tenant ID: the workspace to act in (optional; the key's default workspace otherwise).",
          },
          BearerAuth: { type: 'http', scheme: 'bearer', description: 'Bearer Auth: the API key as `Authorization: Bearer <key>`.' },
          ListenerToken: {
            type: 'http',
            scheme: 'bearer',
            description: "A listener agent's token (`POST /v2/listeners/{id}/tokens`), on its own listener's agent routes only.",
          },
        },
      },
      // Either key header, each with or without X-Tenant-Id.
      security: [{ ApiKey: [], TenantId: [] }, { ApiKey: [] }, { BearerAuth: [], TenantId: [] }, { BearerAuth: [] }],
      paths,
    });
  }
}

/** `base`, or `base_2`, `base_3`… if it is taken; '' for no name. */
function uniqueId(base: string, used: Set<string>): string {
  if (!base) return '';
  let id = base;
  for (let n = 2; used.has(id); n++) id = `${base}_${n}`;
  used.add(id);
  return id;
}

function operation(route: RouteDoc, schemas: SchemaComponents): Record<string, unknown> {
  const parameters: unknown[] = [...route.path.matchAll(/:(\w+)/g)].map((m) => {
    const name = m[1]!;
    const given = route.pathParams?.[name];
    return { name, in: 'path', required: true, schema: given ? schemas.schema(given, 'input') : { type: 'string', format: 'uuid' } };
  });
  if (route.query) {
    const schema = schemas.inlineSchema(route.query, 'input') as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
    for (const [name, property] of Object.entries(schema.properties ?? {})) {
      const { description, ...rest } = property;
      parameters.push({ name, in: 'query', required: schema.required?.includes(name) ?? false, ...(description ? { description } : {}), schema: rest });
    }
  }
  for (const header of route.headers ?? []) {
    parameters.push({
      name: header.name,
      in: 'header',
      required: header.required ?? false,
      description: header.description,
      schema: header.schema ? schemas.schema(header.schema, 'input') : { type: 'string' },
    });
  }

  const responses: Record<string, unknown> = {};
  // The API's JSON routes name each unknown body field they ignored in a Warning header (contract §2);
  // the routes without an API key (webhook) take foreign bodies as they are.
  const success: ResponseDoc =
    route.body && route.auth === 'api-key'
      ? {
          ...route.response,
          headers: { Warning: 'One `299 - "Unknown field ignored: body.<path>"` value per unknown field that was ignored', ...route.response.headers },
        }
      : route.response;
  for (const answer of [success, ...(route.responses ?? [])]) responses[String(answer.status)] = response(answer, schemas);
  for (const status of route.errors ?? derivedErrors(route)) {
    if (responses[String(status)]) continue;
    const schema = status === 422 ? HTTPValidationError : ErrorDetail;
    responses[String(status)] = response({ status, schema, description: ERROR_DESCRIPTIONS[status] ?? 'Error', headers: ERROR_HEADERS[status] }, schemas);
  }

  return {
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.body || route.bodyContentType
      ? {
          requestBody: {
            required: true,
            content: {
              [route.bodyContentType ?? 'application/json']: {
                schema: route.body ? schemas.schema(route.body, 'input') : { type: 'string', contentMediaType: route.bodyContentType },
              },
            },
          },
        }
      : {}),
    responses: Object.fromEntries(Object.entries(responses).sort(([a], [b]) => a.localeCompare(b))),
    ...(route.security ? { security: route.security } : route.auth !== 'api-key' ? { security: [] } : {}),
    ...(route.ownInput ? { 'x-reads-own-input': route.ownInput } : {}),
  };
}

function response(answer: ResponseDoc, schemas: SchemaComponents): Record<string, unknown> {
  const headers = Object.entries(answer.headers ?? {});
  return {
    description: answer.description ?? (answer.schema ? 'Success' : 'Success, no body'),
    ...(headers.length > 0 ? { headers: Object.fromEntries(headers.map(([name, description]) => [name, { description, schema: { type: 'string' } }])) } : {}),
    ...(answer.schema ? { content: { [answer.contentType ?? 'application/json']: { schema: schemas.schema(answer.schema, 'output') } } } : {}),
  };
}
