import { z } from 'zod';

let builtCount = 0;

/** How many `lazySchema` schemas have been built in this process (a test reads it: a start builds none). */
export function lazySchemasBuilt(): number {
  return builtCount;
}

/**
 * The schema `build` makes, made when it is first used rather than when its module is imported.
 *
 * Why: building the some 370 schemas of shared/ at import cost every server start 30–40 ms of CPU
 * beyond zod's own load, and most of what the idle server kept in its old space beyond a bare one
 * (docs/decisions/server-start.md); a start needs none of them, a request only its route's.
 *
 * How: the answer is an empty object whose prototype is a Proxy. The first read, `in` or assignment
 * of any property (`X.parse`, `X.optional()`, `X instanceof z.ZodType`, zod reading `X._zod` inside
 * another schema) finds nothing on the object itself and so asks the Proxy, which builds the schema
 * and initialises the object itself as a copy of it, the way zod's own `clone()` does (its
 * constructor run on it with the built schema's definition), then answers from it. From then on
 * the object is a plain zod schema, its prototype zod's: no Proxy stays in the way of a parse, and
 * its identity is the one every other schema and registry holds (zod's JSON Schema generation keys
 * by identity, and a schema's internals point back at the object they were made for). The built
 * schema's metadata (`.meta()`, `.describe()`) and parent go to the object too; the built schema
 * itself is dropped.
 *
 * Until then, what does not go through the prototype (`Object.keys`, an own-property check) sees an
 * empty object: zod only reads schemas through their properties.
 */
/* @__NO_SIDE_EFFECTS__ */
export function lazySchema<T extends z.core.$ZodType>(build: () => T): T {
  let state: 'waiting' | 'building' | 'built' = 'waiting';
  const materialize = (): T => {
    if (state === 'built') return schema;
    if (state === 'building') throw new Error('A lazySchema was read while it was being built (it refers to itself: use z.lazy)');
    state = 'building';
    const built = build();
    const { constr, def, parent } = built._zod;
    Object.setPrototypeOf(schema, constr.prototype);
    // What `new constr(def)` does, on the object that already stands for the schema.
    (constr as unknown as (this: T, def: unknown) => void).call(schema, def);
    if (parent !== undefined) schema._zod.parent = parent;
    const meta = z.globalRegistry.get(built);
    if (meta !== undefined) z.globalRegistry.add(schema, meta);
    state = 'built';
    builtCount += 1;
    return schema;
  };
  // Made with its prototype rather than given one afterwards: V8 keeps an object made without a
  // prototype (Object.create(null)) as a dictionary, and every parse reads the schema's properties.
  const schema: T = Object.create(
    new Proxy(Object.create(null), {
      get: (_, key) => Reflect.get(materialize(), key),
      has: (_, key) => Reflect.has(materialize(), key),
      set: (_, key, value) => Reflect.set(materialize(), key, value),
    }),
  );
  return schema;
}
