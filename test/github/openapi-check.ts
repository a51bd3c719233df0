import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';

/**
 * Checks requests and answers against GitHub's own published OpenAPI description
 * (`@octokit/openapi`, api.github.com): what the control plane sends must be what GitHub accepts,
 * and what the stand-in answers must be what GitHub answers. Request bodies are checked strictly
 * (a field the description does not name is an error, where GitHub would silently ignore it: a
 * typo in a field name is caught here rather than on github.com).
 */
export class GithubOpenApi {
  readonly #doc: { paths: Record<string, Record<string, Operation>> };
  readonly #ajv: Ajv;
  readonly #cache = new Map<string, ValidateFunction>();
  readonly #templates: Array<{ template: string; pattern: RegExp }>;

  constructor() {
    const path = createRequire(import.meta.url).resolve('@octokit/openapi/generated/api.github.com.deref.json');
    this.#doc = JSON.parse(readFileSync(path, 'utf8'));
    this.#ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true });
    (addFormats as unknown as (ajv: Ajv) => void)(this.#ajv);
    this.#templates = Object.keys(this.#doc.paths).map((template) => ({
      template,
      pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }));
  }

  /** The description's path template for a concrete path (`/repos/a/b/statuses/c` → `/repos/{owner}/{repo}/statuses/{sha}`). */
  templateOf(method: string, path: string): string | null {
    const bare = path.split('?')[0]!;
    const found = this.#templates.filter((t) => t.pattern.test(bare) && this.#doc.paths[t.template]![method.toLowerCase()]);
    // The most literal template wins (`/app/installations/{id}` over `/app/{x}/{y}` style overlaps).
    found.sort((a, b) => (a.template.match(/\{/g)?.length ?? 0) - (b.template.match(/\{/g)?.length ?? 0));
    return found[0]?.template ?? null;
  }

  /** Problems with a request body (empty when it is one GitHub accepts). */
  checkRequest(method: string, template: string, body: unknown): string[] {
    const operation = this.#doc.paths[template]?.[method.toLowerCase()];
    if (!operation) return [`${method} ${template} is not in GitHub's description`];
    const schema = operation.requestBody?.content?.['application/json']?.schema;
    if (!schema) return body === undefined || body === null ? [] : [`${method} ${template} takes no JSON body`];
    if (body === undefined && !operation.requestBody?.required) return [];
    return this.#check(`req ${method} ${template}`, strict(schema), body);
  }

  /** Problems with an answer (empty when it is one GitHub gives); a status the description does not list is a problem. */
  checkResponse(method: string, template: string, status: number, body: unknown): string[] {
    const operation = this.#doc.paths[template]?.[method.toLowerCase()];
    const response = operation?.responses?.[String(status)];
    if (!response) return [`${status} is not an answer GitHub's description lists for ${method} ${template}`];
    const schema = response.content?.['application/json']?.schema;
    return schema ? this.#check(`res ${method} ${template} ${status}`, schema, body) : [];
  }

  /** Whether the description lists `status` for the operation (fault answers the stand-in injects may not be). */
  lists(method: string, template: string, status: number): boolean {
    return Boolean(this.#doc.paths[template]?.[method.toLowerCase()]?.responses?.[String(status)]);
  }

  #check(key: string, schema: object, value: unknown): string[] {
    let validate = this.#cache.get(key);
    if (!validate) {
      validate = this.#ajv.compile(jsonSchemaOf(schema) as object);
      this.#cache.set(key, validate);
    }
    if (validate(value)) return [];
    return (validate.errors ?? []).map(
      (e) =>
        `${e.instancePath || '(body)'} ${e.message ?? 'is invalid'}${e.params && 'additionalProperty' in e.params ? `: ${String(e.params.additionalProperty)}` : ''}`,
    );
  }
}

type Operation = {
  requestBody?: { required?: boolean; content?: Record<string, { schema?: object }> };
  responses?: Record<string, { content?: Record<string, { schema?: object }> }>;
};

/** A copy of a request schema in which objects with named properties take no others. */
function strict(schema: object): object {
  const walk = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(walk);
    if (node === null || typeof node !== 'object') return node;
    const copy: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(node))
      copy[key] = key === 'properties' ? Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, walk(v)])) : walk(value);
    if (copy.type === 'object' && copy.properties && copy.additionalProperties === undefined && !copy.oneOf && !copy.anyOf && !copy.allOf)
      copy.additionalProperties = false;
    return copy;
  };
  return walk(schema) as object;
}

/**
 * OpenAPI 3.0's `nullable: true` as JSON Schema (which Ajv checks): `type: [t, 'null']`, or, where
 * there is no `type` (a `$ref` or `anyOf` made nullable), any of the schema and null.
 */
function jsonSchemaOf(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(jsonSchemaOf);
  if (node === null || typeof node !== 'object') return node;
  const { nullable, ...rest } = node as Record<string, unknown>;
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(rest)) {
    copy[key] =
      key === 'properties' || key === 'patternProperties'
        ? Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, jsonSchemaOf(v)]))
        : jsonSchemaOf(value);
  }
  if (nullable !== true) return copy;
  if (typeof copy.type === 'string') {
    const withNull: Record<string, unknown> = { ...copy, type: [copy.type, 'null'] };
    if (Array.isArray(copy.enum)) withNull.enum = [...copy.enum, null];
    return withNull;
  }
  return { anyOf: [copy, { type: 'null' }] };
}
