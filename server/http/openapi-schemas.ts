import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import * as sharedSchemas from '../../shared/schemas/index.ts';

type Io = 'input' | 'output';
type Json = Record<string, unknown>;
const DEFS_PREFIX = '#/$defs/';

/**
 * The shared schemas that become named components (`#/components/schemas/<export name>`), so
 * generated clients get named types (`Deployment`, `SourceConfig`) instead of one anonymous type
 * per operation. Objects, enums and unions are named; plain strings and numbers (`Uuid`,
 * `Timestamp`) stay inline, and query schemas are spread into parameters, so they are left out.
 */
export function sharedSchemaNames(): z.core.$ZodRegistry<{ id: string }> {
  const registry = new NamedSchemas();
  for (const [name, value] of Object.entries(sharedSchemas)) {
    if (!(value instanceof z.ZodType) || name.endsWith('Query')) continue;
    const plain = z.toJSONSchema(value, { unrepresentable: 'any' }) as Json;
    const structured = plain.type === 'object' || 'enum' in plain || 'oneOf' in plain || 'anyOf' in plain || 'properties' in plain;
    if (structured && !registry.has(value)) registry.add(value, { id: name });
  }
  return registry;
}

/**
 * Component names, read together with the global registry: `toJSONSchema` takes one metadata
 * registry, and the schemas' own `.describe()` / `.meta()` texts live in the global one.
 */
class NamedSchemas extends z.core.$ZodRegistry<{ id: string }> {
  override get(schema: z.core.$ZodType): { id: string } | undefined {
    const global = z.globalRegistry.get(schema);
    const own = super.get(schema);
    return global || own ? ({ ...global, ...own } as { id: string }) : undefined;
  }
}

/**
 * Turns zod schemas into JSON Schema for one OpenAPI document, collecting the named ones as
 * components. A schema that reads differently as a request (input: defaults optional) and as an
 * answer (output) gets two components, `Name` (answer) and `NameInput` (request); one that reads
 * the same is one component. Refs point at a placeholder (`Name@input`) until `finish()` knows
 * which is which and rewrites the whole document.
 */
export class SchemaComponents {
  readonly #registry: z.core.$ZodRegistry<{ id: string }>;
  /** `${id}@${io}` → body, with refs in placeholder form. */
  readonly #defs = new Map<string, Json>();

  constructor(registry: z.core.$ZodRegistry<{ id: string }> = sharedSchemaNames()) {
    this.#registry = registry;
  }

  /** The JSON Schema of `schema` (a `$ref` when it is named). */
  schema(schema: z.ZodType, io: Io): Json {
    const generated = z.toJSONSchema(schema, { io, metadata: this.#registry, unrepresentable: 'any' }) as Json;
    // Requests may carry fields the server does not know: it ignores them with a Warning (contract §2), so the document must not forbid them.
    const { $schema: _dialect, $defs, ...root } = (io === 'input' ? acceptingUnknownFields(generated) : generated) as Json & { $defs?: Record<string, Json> };
    for (const [id, body] of Object.entries($defs ?? {})) this.#defs.set(`${id}@${io}`, placeholders(body, io));
    return placeholders(root, io);
  }

  /** The body of `schema` itself, never a `$ref` to it (for a query object spread into parameters). */
  inlineSchema(schema: z.ZodType, io: Io): Json {
    const root = this.schema(schema, io);
    const ref = typeof root.$ref === 'string' && root.$ref.startsWith(PLACEHOLDER_PREFIX) ? root.$ref.slice(PLACEHOLDER_PREFIX.length) : null;
    return ref && Object.keys(root).length === 1 ? structuredClone(this.#defs.get(ref)!) : root;
  }

  /** `document` with every placeholder ref resolved, and the components it refers to added under `components.schemas`. */
  finish<T extends Record<string, unknown>>(document: T): T {
    const ids = new Set([...this.#defs.keys()].map((key) => key.slice(0, key.lastIndexOf('@'))));
    const body = (id: string, io: Io) => this.#defs.get(`${id}@${io}`);
    // A schema reads differently in the two directions if its bodies differ (placeholders aside),
    // or if it refers to one that does.
    const split = new Set(
      [...ids].filter((id) => body(id, 'input') && body(id, 'output') && !isDeepStrictEqual(withoutIo(body(id, 'input')), withoutIo(body(id, 'output')))),
    );
    for (let changed = true; changed; ) {
      changed = false;
      for (const id of ids) {
        if (split.has(id)) continue;
        if ([...refsIn(body(id, 'input')), ...refsIn(body(id, 'output'))].some((ref) => split.has(ref.slice(0, ref.lastIndexOf('@'))))) {
          split.add(id);
          changed = true;
        }
      }
    }
    const nameOf = (placeholder: string) => {
      const at = placeholder.lastIndexOf('@');
      const id = placeholder.slice(0, at);
      return split.has(id) && placeholder.slice(at + 1) === 'input' ? `${id}Input` : id;
    };
    // Only what the document refers to, directly or through other components (a query object
    // spread into parameters is converted, but never referred to).
    const components: Record<string, Json> = {};
    const queue = refsIn(document);
    for (let placeholder = queue.pop(); placeholder !== undefined; placeholder = queue.pop()) {
      const name = nameOf(placeholder);
      const value = this.#defs.get(placeholder);
      if (components[name] || !value) continue;
      components[name] = value;
      queue.push(...refsIn(value));
    }
    const sorted = Object.fromEntries(Object.entries(components).sort(([a], [b]) => a.localeCompare(b)));
    return resolve({ ...document, components: { schemas: sorted, ...(document.components as Json | undefined) } }, nameOf) as T;
  }
}

const PLACEHOLDER_PREFIX = '#/components/schemas/';

/** `#/$defs/Name` → `#/components/schemas/Name@io`. */
function placeholders(value: Json, io: Io): Json {
  return mapRefs(value, (ref) => (ref.startsWith(DEFS_PREFIX) ? `${PLACEHOLDER_PREFIX}${ref.slice(DEFS_PREFIX.length)}@${io}` : ref)) as Json;
}

function withoutIo(value: unknown): unknown {
  return mapRefs(value, (ref) => ref.replace(/@(input|output)$/, ''));
}

function resolve(value: unknown, nameOf: (placeholder: string) => string): unknown {
  return mapRefs(value, (ref) =>
    ref.startsWith(PLACEHOLDER_PREFIX) && /@(input|output)$/.test(ref) ? `${PLACEHOLDER_PREFIX}${nameOf(ref.slice(PLACEHOLDER_PREFIX.length))}` : ref,
  );
}

function refsIn(value: unknown, found: string[] = []): string[] {
  mapRefs(value, (ref) => {
    if (ref.startsWith(PLACEHOLDER_PREFIX)) found.push(ref.slice(PLACEHOLDER_PREFIX.length));
    return ref;
  });
  return found;
}

/** A copy of `value` with every `$ref` string passed through `change`. */
function mapRefs(value: unknown, change: (ref: string) => string): unknown {
  if (Array.isArray(value)) return value.map((item) => mapRefs(item, change));
  if (!value || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, child]) => [key, key === '$ref' && typeof child === 'string' ? change(child) : mapRefs(child, change)]),
  );
}

/** A copy of `schema` without `additionalProperties: false` anywhere. */
function acceptingUnknownFields(schema: Json): Json {
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) => (key === 'additionalProperties' && value === false ? undefined : value)) as Json;
}
