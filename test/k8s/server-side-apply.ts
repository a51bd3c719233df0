/**
 * SIMULATION of the API server's field ownership (structured merge), for the Kubernetes API
 * stand-in: each manager owns a set of fields, recorded in `metadata.managedFields` in the real
 * `FieldsV1` form (`{"f:spec":{"f:replicas":{}}}`, list items by key `k:{"name":"api"}`). An apply
 * sets what the applier gives, removes what it owned before and no longer gives (unless another
 * manager owns it too), merges keyed lists item by item, and reports a conflict where another
 * manager owns a field the applier would change (unless forced, which takes the field over).
 *
 * Simplified from sigs.k8s.io/structured-merge-diff: list keys come from a small table rather than
 * the OpenAPI schema (`name` for containers, env, volumes…, `mountPath`, `containerPort`, `port`,
 * `type` for conditions); other lists are atomic; sets (`v:`) are not modelled.
 */

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Fields = Set<string>;
export type ManagedFieldsEntry = {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  fieldsType: 'FieldsV1';
  fieldsV1: Record<string, unknown>;
  subresource?: string;
  time?: string;
};

/** The field of a list's items that identifies them, by the list's own field name. */
const LIST_KEYS: Record<string, readonly string[]> = {
  containers: ['name'],
  initContainers: ['name'],
  env: ['name'],
  volumes: ['name'],
  imagePullSecrets: ['name'],
  volumeMounts: ['mountPath'],
  ports: ['containerPort', 'port'],
  conditions: ['type'],
};

function isMap(value: unknown): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The key field of `list` (named `field`), or null when the list is atomic (replaced whole). */
function keyOf(field: string, list: Json[]): string | null {
  for (const candidate of LIST_KEYS[field] ?? []) {
    if (list.every((item) => isMap(item) && item[candidate] !== undefined)) return candidate;
  }
  return null;
}

function itemSegment(key: string, item: Record<string, Json>): string {
  return `k:${JSON.stringify({ [key]: item[key] })}`;
}

/** The leaf paths of an object's fields (spec, data, labels…; never status or the object's identity). */
export function fieldSetOf(object: Record<string, unknown>): Fields {
  const out: Fields = new Set();
  const walk = (value: Json, path: string[], field: string) => {
    if (isMap(value) && Object.keys(value).length > 0) {
      for (const [k, v] of Object.entries(value)) walk(v, [...path, `f:${k}`], k);
      return;
    }
    if (Array.isArray(value)) {
      const key = keyOf(field, value);
      if (key && value.length > 0) {
        for (const item of value as Array<Record<string, Json>>) {
          const segment = itemSegment(key, item);
          out.add(JSON.stringify([...path, segment, '.']));
          for (const [k, v] of Object.entries(item)) walk(v, [...path, segment, `f:${k}`], k);
        }
        return;
      }
    }
    out.add(JSON.stringify(path));
  };
  for (const [k, v] of Object.entries(object)) {
    if (k === 'apiVersion' || k === 'kind' || k === 'status') continue;
    if (k === 'metadata' && isMap(v)) {
      for (const m of ['labels', 'annotations', 'ownerReferences'] as const) if (v[m] !== undefined) walk(v[m] as Json, ['f:metadata', `f:${m}`], m);
      continue;
    }
    walk(v as Json, [`f:${k}`], k);
  }
  return out;
}

export function toFieldsV1(fields: Fields): Record<string, unknown> {
  const root: Record<string, Record<string, unknown>> = {};
  for (const path of fields) {
    let node: Record<string, unknown> = root;
    for (const segment of JSON.parse(path) as string[]) node = (node[segment] ??= {}) as Record<string, unknown>;
  }
  return root;
}

export function fromFieldsV1(fieldsV1: Record<string, unknown>): Fields {
  const out: Fields = new Set();
  const walk = (node: Record<string, unknown>, path: string[]) => {
    const children = Object.entries(node);
    if (children.length === 0) out.add(JSON.stringify(path));
    for (const [segment, child] of children) walk(child as Record<string, unknown>, [...path, segment]);
  };
  walk(fieldsV1, []);
  return out;
}

/** Whether `fields` holds `prefix` or anything under it. */
function ownsUnder(fields: Fields, prefix: string[]): boolean {
  const head = JSON.stringify(prefix).slice(0, -1);
  for (const path of fields) if (path === `${head}]` || path.startsWith(`${head},`)) return true;
  return false;
}

/** The value at a field path (undefined when absent). */
function valueAt(object: Json, path: readonly string[]): Json | undefined {
  let node: Json | undefined = object;
  for (const segment of path) {
    if (node === undefined || segment === '.') return node;
    if (segment.startsWith('f:')) node = isMap(node) ? node[segment.slice(2)] : undefined;
    else if (segment.startsWith('k:')) {
      const [[k, v]] = Object.entries(JSON.parse(segment.slice(2)) as Record<string, Json>) as [[string, Json]];
      node = Array.isArray(node) ? node.find((item) => isMap(item) && item[k] === v) : undefined;
    }
  }
  return node;
}

/**
 * Merges `applied` into `live` as an apply by a manager that owned `mine` before: fields given are
 * set, keyed list items merged one by one, and a field the applier owned and no longer gives goes,
 * unless another manager (`others`) owns something in it.
 */
function merge(live: Json | undefined, applied: Json, path: string[], field: string, mine: Fields, others: Fields): Json {
  const removable = (p: string[]) => ownsUnder(mine, p) && !ownsUnder(others, p);
  if (isMap(live) && isMap(applied)) {
    const out: Record<string, Json> = {};
    for (const [k, v] of Object.entries(live)) {
      if (k in applied) out[k] = merge(v, applied[k] as Json, [...path, `f:${k}`], k, mine, others);
      else if (!removable([...path, `f:${k}`])) out[k] = v;
    }
    for (const [k, v] of Object.entries(applied)) if (!(k in live)) out[k] = v;
    return out;
  }
  if (Array.isArray(live) && Array.isArray(applied)) {
    const key = keyOf(field, [...live, ...applied]);
    if (!key) return applied;
    const given = new Map((applied as Array<Record<string, Json>>).map((item) => [itemSegment(key, item), item]));
    const out: Json[] = [];
    for (const item of live as Array<Record<string, Json>>) {
      const segment = itemSegment(key, item);
      const next = given.get(segment);
      if (next) {
        out.push(merge(item, next, [...path, segment], field, mine, others));
        given.delete(segment);
      } else if (!removable([...path, segment])) out.push(item);
    }
    out.push(...given.values());
    return out;
  }
  return applied;
}

export type ApplyOutcome = { object: Record<string, unknown>; managedFields: ManagedFieldsEntry[] } | { conflicts: string[] };

/** A server-side apply of `applied` by `manager` onto `live` (null: a new object). */
export function serverSideApply(
  live: Record<string, unknown> | null,
  applied: Record<string, unknown>,
  manager: string,
  force: boolean,
  apiVersion: string,
): ApplyOutcome {
  const entries = ((live?.metadata as { managedFields?: ManagedFieldsEntry[] } | undefined)?.managedFields ?? []).map((e) => ({
    ...e,
    fields: fromFieldsV1(e.fieldsV1),
  }));
  const isMine = (e: { manager: string; operation: string; subresource?: string }) => e.manager === manager && e.operation === 'Apply' && !e.subresource;
  const mine: Fields = new Set(entries.filter(isMine).flatMap((e) => [...e.fields]));
  const others: Fields = new Set(entries.filter((e) => !isMine(e)).flatMap((e) => [...e.fields]));
  const given = fieldSetOf(applied);
  if (live && !force) {
    const conflicts = [...given].filter((path) => {
      if (!others.has(path)) return false;
      const segments = JSON.parse(path) as string[];
      return JSON.stringify(valueAt(live as Json, segments)) !== JSON.stringify(valueAt(applied as Json, segments));
    });
    if (conflicts.length > 0) {
      const owners = entries.filter((e) => !isMine(e) && conflicts.some((c) => e.fields.has(c))).map((e) => e.manager);
      return { conflicts: conflicts.map((c) => `conflict with "${owners[0] ?? '?'}": ${pathText(c)}`) };
    }
  }
  const body = {
    ...applied,
    metadata: { labels: (applied.metadata as Record<string, Json>).labels, annotations: (applied.metadata as Record<string, Json>).annotations },
  };
  const liveBody = live
    ? { ...live, metadata: { labels: (live.metadata as Record<string, Json>).labels, annotations: (live.metadata as Record<string, Json>).annotations } }
    : {};
  const merged = merge(withoutUndefined(liveBody) as Json, withoutUndefined(body) as Json, [], '', mine, others) as Record<string, Json>;
  const liveMeta = (live?.metadata ?? {}) as Record<string, unknown>;
  const mergedMeta = merged.metadata as Record<string, Json>;
  const object: Record<string, unknown> = {
    ...merged,
    metadata: { ...liveMeta, ...(applied.metadata as object), labels: mergedMeta.labels, annotations: mergedMeta.annotations },
  };
  const meta = object.metadata as Record<string, unknown>;
  for (const field of ['labels', 'annotations'] as const) if (meta[field] === undefined || isEmpty(meta[field])) delete meta[field];
  if (live) object.status = live.status;
  // A field given with another value is taken from its other managers (forced); given with the
  // value it has, its ownership is shared, as the real server does.
  const changed = (path: string) => {
    const segments = JSON.parse(path) as string[];
    return JSON.stringify(valueAt((live ?? {}) as Json, segments)) !== JSON.stringify(valueAt(applied as Json, segments));
  };
  const kept = entries
    .filter((e) => !isMine(e))
    .map((e) => ({ ...e, fields: new Set([...e.fields].filter((f) => !(given.has(f) && changed(f)))) }))
    .filter((e) => e.fields.size > 0);
  const now = new Date().toISOString();
  const previousMine = entries.find(isMine);
  const sameSet = previousMine && previousMine.fields.size === given.size && [...given].every((f) => previousMine.fields.has(f));
  const managedFields: ManagedFieldsEntry[] = [
    ...kept.map(({ fields, ...e }) => ({ ...e, fieldsV1: toFieldsV1(fields) })),
    { manager, operation: 'Apply', apiVersion, fieldsType: 'FieldsV1', fieldsV1: toFieldsV1(given), time: sameSet ? (previousMine.time ?? now) : now },
  ];
  return { object, managedFields };
}

/**
 * An update (PUT, merge patch, a /scale write) by `manager`: it comes to own each field whose value
 * it changed, and the managers that owned those fields lose them.
 */
export function recordUpdate(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  manager: string,
  apiVersion: string,
  subresource?: string,
): ManagedFieldsEntry[] {
  const entries = ((before.metadata as { managedFields?: ManagedFieldsEntry[] }).managedFields ?? []).map((e) => ({ ...e, fields: fromFieldsV1(e.fieldsV1) }));
  const changed = new Set(
    [...fieldSetOf(after)].filter((path) => {
      const segments = JSON.parse(path) as string[];
      return JSON.stringify(valueAt(before as Json, segments)) !== JSON.stringify(valueAt(after as Json, segments));
    }),
  );
  if (changed.size === 0) return entries.map(({ fields: _f, ...e }) => e);
  const isThis = (e: { manager: string; operation: string; subresource?: string }) =>
    e.manager === manager && e.operation === 'Update' && e.subresource === subresource;
  const own = new Set([...(entries.find(isThis)?.fields ?? []), ...changed]);
  return [
    ...entries
      .filter((e) => !isThis(e))
      .map((e) => ({ ...e, fields: new Set([...e.fields].filter((f) => !changed.has(f))) }))
      .filter((e) => e.fields.size > 0)
      .map(({ fields, ...e }) => ({ ...e, fieldsV1: toFieldsV1(fields) })),
    {
      manager,
      operation: 'Update',
      apiVersion,
      fieldsType: 'FieldsV1',
      fieldsV1: toFieldsV1(own),
      time: new Date().toISOString(),
      ...(subresource ? { subresource } : {}),
    },
  ];
}

/** The fields `manager` owns in an object, as readable paths (`.spec.replicas`), for tests. */
export function fieldsOwnedBy(object: { metadata: Record<string, unknown> }, manager: string): string[] {
  const entries = (object.metadata.managedFields as ManagedFieldsEntry[] | undefined) ?? [];
  return entries
    .filter((e) => e.manager === manager)
    .flatMap((e) => [...fromFieldsV1(e.fieldsV1)])
    .map(pathText)
    .sort();
}

function pathText(path: string): string {
  return (JSON.parse(path) as string[]).map((s) => (s.startsWith('f:') ? `.${s.slice(2)}` : s.startsWith('k:') ? `[${s.slice(2)}]` : '')).join('');
}

function isEmpty(value: unknown): boolean {
  return isMap(value) && Object.keys(value).length === 0;
}

function withoutUndefined(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}
