import { z } from 'zod';
import { ErrorDetail, HTTPValidationError } from '../../shared/schemas/common.ts';

export type RouteDoc = {
  method: 'get' | 'post' | 'patch' | 'delete' | 'put';
  /** Hono-style path, `:param` segments. */
  path: string;
  summary: string;
  tag: string;
  body?: z.ZodType;
  /** The route ignores unknown body fields (with a `Warning`), so the document must not forbid them. */
  bodyAcceptsUnknownFields?: boolean;
  query?: z.ZodType;
  /** Status and schema of the success answer; `null` schema for an empty body. */
  response: { status: number; schema: z.ZodType | null; description?: string };
  /** False for the routes that take no API key. */
  auth?: boolean;
};

/**
 * Collects route descriptions as routes are registered, and turns them into an OpenAPI 3.1
 * document from the same zod schemas the server validates with, so the two cannot drift.
 */
export class OpenApiRegistry {
  readonly #routes: RouteDoc[] = [];

  add(route: RouteDoc): void {
    this.#routes.push(route);
  }

  document(): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const route of this.#routes) {
      const path = route.path.replace(/:(\w+)/g, '{$1}');
      const parameters: unknown[] = [...route.path.matchAll(/:(\w+)/g)].map((m) => ({
        name: m[1],
        in: 'path',
        required: true,
        schema: { type: 'string', format: 'uuid' },
      }));
      if (route.query) {
        const schema = schemaOf(route.query) as { properties?: Record<string, unknown>; required?: string[] };
        for (const [name, property] of Object.entries(schema.properties ?? {})) {
          parameters.push({ name, in: 'query', required: schema.required?.includes(name) ?? false, schema: property });
        }
      }
      const responses: Record<string, unknown> = {
        [String(route.response.status)]: route.response.schema
          ? { description: route.response.description ?? 'Success', content: { 'application/json': { schema: schemaOf(route.response.schema, 'output') } } }
          : { description: route.response.description ?? 'Success, no body' },
      };
      const errors: Record<number, string> = { 400: 'Bad request', 404: 'Not found', 409: 'Conflict' };
      if (route.auth !== false) Object.assign(errors, { 401: 'Missing or invalid API key', 403: 'Workspace not allowed' });
      for (const [status, description] of Object.entries(errors)) {
        responses[status] = { description, content: { 'application/json': { schema: schemaOf(ErrorDetail, 'output') } } };
      }
      responses['422'] = { description: 'Validation error', content: { 'application/json': { schema: schemaOf(HTTPValidationError, 'output') } } };
      paths[path] ??= {};
      paths[path][route.method] = {
        summary: route.summary,
        tags: [route.tag],
        ...(parameters.length > 0 ? { parameters } : {}),
        ...(route.body ? { requestBody: { required: true, content: { 'application/json': { schema: route.bodyAcceptsUnknownFields ? allowingUnknown(schemaOf(route.body)) : schemaOf(route.body) } } } } : {}),
        responses,
        ...(route.auth === false ? { security: [] } : {}),
      };
    }
    return {
      openapi: '3.1.0',
      info: { title: 'Deployment control plane', version: '0.1.0' },
      components: {
        securitySchemes: {
          'API Key': { type: 'apiKey', in: 'header', name: 'X-Api-Key' },
          'Tenant ID': { type: 'apiKey', in: 'header', name: 'X-Tenant-Id' },
          'Bearer Auth': { type: 'http', scheme: 'bearer' },
        },
      },
      security: [{ 'API Key': [] }, { 'Bearer Auth': [] }],
      paths,
    };
  }
}

/** The schema without `additionalProperties: false` anywhere (a copy). */
function allowingUnknown(schema: Record<string, unknown>): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) => (key === 'additionalProperties' && value === false ? undefined : value)) as Record<string, unknown>;
}

function schemaOf(schema: z.ZodType, io: 'input' | 'output' = 'input'): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as Record<string, unknown>;
  return rest;
}
