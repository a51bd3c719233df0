import fc from 'fast-check';

/** A body as sent: bytes and the Content-Type header (undefined = none). */
export type RawBody = { bytes: Buffer | undefined; contentType: string | undefined; why: string };

type Path = Array<string | number>;

/** Every path to a node of a JSON value (the root is []). */
function paths(value: unknown, at: Path = [], out: Path[] = []): Path[] {
  out.push(at);
  if (Array.isArray(value)) value.forEach((child, i) => paths(child, [...at, i], out));
  else if (value !== null && typeof value === 'object') for (const [key, child] of Object.entries(value)) paths(child, [...at, key], out);
  return out;
}

function replaceAt(value: unknown, at: Path, replacement: (old: unknown) => unknown): unknown {
  if (at.length === 0) return replacement(value);
  const [head, ...rest] = at;
  if (Array.isArray(value)) return value.map((child, i) => (i === head ? replaceAt(child, rest, replacement) : child));
  const copy = { ...(value as Record<string, unknown>) };
  copy[head as string] = replaceAt(copy[head as string], rest, replacement);
  return copy;
}

function removeAt(value: unknown, at: Path): unknown {
  if (at.length === 0) return undefined;
  const parent = at.slice(0, -1);
  const key = at[at.length - 1]!;
  return replaceAt(value, parent, (node) => {
    if (Array.isArray(node)) return node.filter((_, i) => i !== key);
    if (node && typeof node === 'object') {
      const copy = { ...(node as Record<string, unknown>) };
      delete copy[key as string];
      return copy;
    }
    return node;
  });
}

const DEEP = '__deep_nesting_marker__';

/** JSON text with `depth` levels of nesting where the marker was: built as text, since a value that deep would overflow JSON.stringify. */
function nestedText(withMarker: unknown, depth: number, asArray: boolean): Buffer {
  const inner = asArray ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
  return Buffer.from(JSON.stringify(withMarker).replace(`"${DEEP}"`, inner));
}

const wrongValue = fc.oneof(
  fc.constant(null),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.string({ maxLength: 20 }),
  fc.constant([]),
  fc.constant({}),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '../../etc/passwd',
    "'; DROP TABLE deployments; --",
    '%00',
    '\uD800',
    'ｆｕｌｌｗｉｄｔｈ',
    '🚀'.repeat(10),
    '1e309',
    '-0',
  ),
);

const json = (value: unknown, why: string): RawBody => ({
  bytes: Buffer.from(value === undefined ? '' : JSON.stringify(value)),
  contentType: 'application/json',
  why,
});

/**
 * Breaks a (mostly valid) body in the ways a client or an attacker would: missing, extra and
 * wrongly-typed fields, huge strings, deep nesting, bytes that are not UTF-8, text that is not
 * JSON, wrong or missing content types. Some bodies pass through unbroken, so valid requests are
 * part of the mix too.
 */
export function breakBody(valid: fc.Arbitrary<unknown>): fc.Arbitrary<RawBody> {
  return valid.chain((value) => {
    const nodes = paths(value);
    const node = fc.constantFrom(...nodes);
    const nonRoot = nodes.length > 1 ? fc.constantFrom(...nodes.slice(1)) : fc.constant<Path>([]);
    return fc.oneof(
      fc.constant(json(value, 'unbroken')),
      nonRoot.map((at) => json(removeAt(value, at), `missing ${at.join('.')}`)),
      fc.tuple(node, fc.string({ minLength: 1, maxLength: 12 }), fc.jsonValue({ maxDepth: 1 })).map(([at, key, extra]) =>
        json(
          replaceAt(value, at, (old) => (old && typeof old === 'object' && !Array.isArray(old) ? { ...old, [key]: extra } : old)),
          `extra ${key} at ${at.join('.')}`,
        ),
      ),
      fc.tuple(node, wrongValue).map(([at, wrong]) =>
        json(
          replaceAt(value, at, () => wrong),
          `wrong type at ${at.join('.')}`,
        ),
      ),
      fc.tuple(node, fc.constantFrom(300, 70_000, 1_100_000)).map(([at, size]) =>
        json(
          replaceAt(value, at, () => 'x'.repeat(size)),
          `string of ${size} at ${at.join('.')}`,
        ),
      ),
      fc.tuple(node, fc.constantFrom(65, 500, 5_000, 100_000), fc.boolean()).map(([at, depth, asArray]) => ({
        bytes: nestedText(
          replaceAt(value, at, () => DEEP),
          depth,
          asArray,
        ),
        contentType: 'application/json',
        why: `nested ${depth} deep at ${at.join('.')}`,
      })),
      fc.integer({ min: 0, max: 40 }).map((cut) => {
        const text = Buffer.from(JSON.stringify(value));
        const at = Math.min(cut, text.length);
        return {
          bytes: Buffer.concat([text.subarray(0, at), Buffer.from([0xff, 0xfe, 0xc3, 0x28]), text.subarray(at)]),
          contentType: 'application/json',
          why: 'invalid UTF-8',
        };
      }),
      fc
        .integer({ min: 0, max: 60 })
        .map((cut) => ({ bytes: Buffer.from(JSON.stringify(value).slice(0, cut)), contentType: 'application/json', why: 'truncated JSON' })),
      fc
        .constantFrom<string | undefined>(
          undefined,
          'text/plain',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/xml',
          'application/jsonx',
          'json',
        )
        .map((contentType) => ({
          bytes: Buffer.from(JSON.stringify(value)),
          contentType,
          why: `content type ${contentType ?? 'missing'}`,
        })),
      fc.constant<RawBody>({ bytes: undefined, contentType: 'application/json', why: 'no body' }),
      fc.jsonValue({ maxDepth: 3 }).map((other) => json(other, 'another JSON value')),
    );
  });
}
