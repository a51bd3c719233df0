import fc from 'fast-check';

/** The parts of a JSON Schema (as `z.toJSONSchema` writes them into /openapi.json) used here. */
export type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  additionalProperties?: boolean | JsonSchema;
  default?: unknown;
};

/**
 * Values that satisfy a JSON Schema, most of the time: enough for requests to get past the first
 * check and reach the deeper rules. `ids` are real identifiers put in uuid fields some of the time,
 * so cross-reference rules (integration, listener) are reached too.
 */
export function arbitraryFor(schema: JsonSchema, ids: string[], depth = 0): fc.Arbitrary<unknown> {
  if (depth > 8) return fc.constant(null);
  const variants = schema.oneOf ?? schema.anyOf;
  if (variants) return fc.oneof(...variants.map((s) => arbitraryFor(s, ids, depth + 1)));
  if (schema.allOf?.[0]) return arbitraryFor(schema.allOf[0], ids, depth + 1);
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object': {
      const properties = schema.properties ?? {};
      const required = new Set(schema.required ?? []);
      const shape: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [key, value] of Object.entries(properties)) shape[key] = arbitraryFor(value, ids, depth + 1);
      return fc.record(shape, { requiredKeys: [...required].filter((key) => key in properties) });
    }
    case 'array':
      return fc.array(schema.items ? arbitraryFor(schema.items, ids, depth + 1) : fc.jsonValue(), { maxLength: Math.min(schema.maxItems ?? 3, 3) });
    case 'string':
      return stringFor(schema, ids);
    case 'integer':
      return fc.integer({ min: schema.minimum ?? -1000, max: Math.min(schema.maximum ?? 100_000, Number.MAX_SAFE_INTEGER) });
    case 'number':
      return fc.double({ min: schema.minimum ?? -1e6, max: schema.maximum ?? 1e6, noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

function stringFor(schema: JsonSchema, ids: string[]): fc.Arbitrary<string> {
  if (schema.format === 'uuid') return ids.length > 0 ? fc.oneof(fc.constantFrom(...ids), fc.uuid()) : fc.uuid();
  // Years 0–9999 only: a wider date prints as an extended year (`+275760-…`), which is not RFC 3339's
  // date-time and is refused as such, so it would never reach the deeper rules.
  if (schema.format === 'date-time')
    return fc.date({ min: new Date('0000-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }).map((d) => d.toISOString());
  if (schema.pattern) {
    try {
      const pattern = new RegExp(schema.pattern);
      const maxLength = schema.maxLength ?? 200;
      // Cut to the length limit rather than filter (filtering regex-made strings is slow); a cut
      // that breaks the pattern is one more invalid input.
      return fc.stringMatching(pattern, { size: 'small' }).map((s) => s.slice(0, maxLength));
    } catch {
      // a pattern JavaScript cannot compile: fall through to plain strings
    }
  }
  return fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 40) });
}

/**
 * The document with every `#/components/schemas/…` `$ref` replaced by the schema it names (the
 * served document names shared schemas as components), so the generator above sees plain schemas.
 */
export function inlineSchemaRefs<T>(doc: T): T {
  const components = ((doc as { components?: { schemas?: Record<string, unknown> } }).components?.schemas ?? {}) as Record<string, unknown>;
  const walk = (node: unknown, depth: number): unknown => {
    if (Array.isArray(node)) return node.map((item) => walk(item, depth));
    if (!node || typeof node !== 'object') return node;
    const ref = (node as { $ref?: unknown }).$ref;
    if (typeof ref === 'string' && ref.startsWith('#/components/schemas/')) {
      // A schema that refers to itself is cut off after a few levels, as `arbitraryFor` does.
      return depth > 8 ? {} : walk(components[ref.slice('#/components/schemas/'.length)], depth + 1);
    }
    return Object.fromEntries(Object.entries(node).map(([key, child]) => [key, walk(child, depth)]));
  };
  return walk(doc, 0) as T;
}
