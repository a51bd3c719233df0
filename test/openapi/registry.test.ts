import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defaultOperationId, derivedErrors, OpenApiRegistry, type RouteDoc } from '../../server/http/openapi.ts';
import { SchemaComponents } from '../../server/http/openapi-schemas.ts';
import { Deployment } from '../../shared/schemas/deployment.ts';

type Op = {
  operationId: string;
  parameters?: Array<{ name: string; in: string; schema: Record<string, unknown> }>;
  responses: Record<string, { content?: Record<string, unknown>; headers?: Record<string, unknown> }>;
};
const opOf = (doc: Record<string, unknown>, path: string, method: string) => (doc.paths as Record<string, Record<string, Op>>)[path]![method]!;

describe('OpenApiRegistry', () => {
  const base = { summary: 's', tag: 't', auth: 'api-key', response: { status: 200, schema: z.object({ a: z.string() }) } } as const;

  it("names operations: explicit, else the hosted document's name, else derived from method and path, always unique", () => {
    const docs = new OpenApiRegistry();
    docs.add({ ...base, method: 'get', path: '/v2/deployments/:deployment_id' });
    docs.add({ ...base, method: 'post', path: '/v2/things/:thing_id/go' });
    docs.add({ ...base, method: 'post', path: '/v2/things/:id/go/' });
    docs.add({ ...base, method: 'get', path: '/v2/listeners', operationId: 'my_list' });
    const doc = docs.document();
    expect(opOf(doc, '/v2/deployments/{deployment_id}', 'get').operationId).toBe('get_deployment_v2_deployments__deployment_id__get');
    expect(opOf(doc, '/v2/things/{thing_id}/go', 'post').operationId).toBe('post_v2_things_thing_id_go');
    expect(opOf(doc, '/v2/things/{id}/go/', 'post').operationId).toBe('post_v2_things_id_go');
    expect(opOf(doc, '/v2/listeners', 'get').operationId).toBe('my_list');
    expect(defaultOperationId('delete', '/v1/api-keys/:key_id')).toBe('delete_v1_api_keys_key_id');
  });

  it('refuses one explicit operationId twice; suffixes derived ones that would clash', () => {
    const docs = new OpenApiRegistry();
    docs.add({ ...base, method: 'get', path: '/a', operationId: 'get_b' });
    expect(() => docs.add({ ...base, method: 'get', path: '/c', operationId: 'get_b' })).toThrow(/used twice/);
    docs.add({ ...base, method: 'get', path: '/b' });
    expect(opOf(docs.document(), '/b', 'get').operationId).toBe('get_b_2');
  });

  it("derives errors from the route's shape", () => {
    const route = (r: Partial<RouteDoc>): RouteDoc => ({ ...base, method: 'get', path: '/x', ...r });
    expect(derivedErrors(route({}))).toEqual([401, 403, 429, 503]);
    expect(derivedErrors(route({ auth: 'none' }))).toEqual([]);
    expect(derivedErrors(route({ path: '/x/:id', query: z.object({}) }))).toEqual([401, 403, 404, 422, 429, 503]);
    expect(derivedErrors(route({ method: 'post', body: z.object({}) }))).toEqual([400, 401, 403, 404, 409, 413, 415, 422, 429, 503]);
    expect(derivedErrors(route({ method: 'put', path: '/up/:id', auth: 'none', bodyContentType: 'application/gzip' }))).toEqual([400, 404, 409, 413, 415, 422]);
  });

  it('types path parameters as uuids unless told, documents headers and extra answers, builds once', () => {
    let asked = 0;
    const docs = new OpenApiRegistry({ serverUrl: () => (asked++, 'https://cp.example.org') });
    docs.add({
      ...base,
      method: 'get',
      path: '/v2/p/:provider_id/:other_id',
      pathParams: { provider_id: z.string().min(1) },
      headers: [{ name: 'Prefer', description: 'wait' }],
      response: { ...base.response, headers: { ETag: 'tag' } },
      responses: [
        { status: 304, schema: null },
        { status: 400, schema: z.string(), contentType: 'text/html' },
      ],
    });
    const doc = docs.document();
    expect(docs.document()).toBe(doc);
    expect(asked).toBe(1);
    expect(doc.servers).toEqual([expect.objectContaining({ url: 'https://cp.example.org' })]);
    const op = opOf(doc, '/v2/p/{provider_id}/{other_id}', 'get');
    expect(op.parameters!.map((p) => [p.name, p.in, p.schema.format ?? p.schema.type])).toEqual([
      ['provider_id', 'path', 'string'],
      ['other_id', 'path', 'uuid'],
      ['Prefer', 'header', 'string'],
    ]);
    expect(Object.keys(op.responses)).toEqual(['200', '304', '400', '401', '403', '404', '422', '429', '503']);
    expect(op.responses['200']!.headers).toHaveProperty('ETag');
    expect(op.responses['304']!.content).toBeUndefined();
    expect(Object.keys(op.responses['400']!.content!)).toEqual(['text/html']);
  });
});

describe('schema texts', () => {
  it('keeps .describe() / .meta() descriptions, of inline and of named (shared) schemas', () => {
    const docs = new OpenApiRegistry();
    docs.add({
      method: 'post',
      path: '/x',
      auth: 'api-key',
      summary: 's',
      tag: 't',
      body: z.object({ a: z.string().describe('the a') }),
      response: { status: 200, schema: Deployment },
    });
    const doc = docs.document() as {
      paths: Record<string, Record<string, { requestBody: { content: Record<string, { schema: { properties: Record<string, { description?: string }> } }> } }>>;
      components: { schemas: Record<string, unknown> };
    };
    expect(doc.paths['/x']!.post!.requestBody.content['application/json']!.schema.properties.a!.description).toBe('the a');
    expect(JSON.stringify(doc.components.schemas)).toContain('is present in the interface but not to be used');
  });
});

describe('SchemaComponents', () => {
  it('names registered schemas as components; one that reads differently as request and answer gets two', () => {
    const Limits = z.object({ max: z.int().default(5) });
    const Tag = z.enum(['a', 'b']);
    const Thing = z.object({ tag: Tag, limits: Limits });
    const registry = z.registry<{ id: string }>();
    registry.add(Limits, { id: 'Limits' }).add(Tag, { id: 'Tag' }).add(Thing, { id: 'Thing' });
    const schemas = new SchemaComponents(registry);
    const Unused = z.object({ u: z.string() });
    registry.add(Unused, { id: 'Unused' });
    schemas.inlineSchema(Unused, 'input');
    const doc = schemas.finish({
      request: schemas.schema(Thing, 'input'),
      answer: schemas.schema(Thing, 'output'),
      tagOnly: schemas.schema(z.object({ t: Tag }), 'input'),
    });
    expect(doc.request).toEqual({ $ref: '#/components/schemas/ThingInput' });
    expect(doc.answer).toEqual({ $ref: '#/components/schemas/Thing' });
    expect(doc.tagOnly).toMatchObject({ properties: { t: { $ref: '#/components/schemas/Tag' } } });
    const components = (doc as unknown as { components: { schemas: Record<string, { required?: string[]; properties?: Record<string, unknown> }> } }).components
      .schemas;
    expect(Object.keys(components)).toEqual(['Limits', 'LimitsInput', 'Tag', 'Thing', 'ThingInput']);
    expect(components.Limits!.required).toEqual(['max']);
    expect(components.LimitsInput!.required).toBeUndefined();
    expect(components.ThingInput!.properties!.limits).toEqual({ $ref: '#/components/schemas/LimitsInput' });
  });
});
