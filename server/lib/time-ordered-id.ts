import { randomFillSync } from 'node:crypto';

/** Random bytes for this many ids are drawn at once (one call into the system's generator). */
const IDS_PER_DRAW = 128;
/** Bytes 6–15 of each id (the version's nibble, 12 random bits, the variant, 62 random bits). */
const RANDOM_BYTES = 10;
const randomPool = Buffer.allocUnsafe(RANDOM_BYTES * IDS_PER_DRAW);
let nextRandom = IDS_PER_DRAW;
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

/**
 * A time-ordered UUID (version 7, RFC 9562 §5.7): the first 48 bits are the Unix time in
 * milliseconds, the other 74 (beside the version and variant) random, from the same generator as
 * `crypto.randomUUID()`. The ids of the rows a create writes (deployment, revision, tracing
 * project) are keys of B-tree indexes: random (version 4) keys put each new row on a page of its
 * own in every such index, so a group commit of 16 creates wrote ~16 pages per index to the
 * write-ahead log; keys that grow with time put the group's rows on the same last page or two
 * (docs/decisions/time-ordered-ids.md). Still a UUID for every client (the API's schemas accept
 * versions 1–8), still unguessable (74 random bits), and it tells no more than the row's own
 * `created_at`, which the API answers anyway.
 */
export function timeOrderedId(now = Date.now()): string {
  if (nextRandom === IDS_PER_DRAW) {
    randomFillSync(randomPool);
    nextRandom = 0;
  }
  const r = nextRandom * RANDOM_BYTES;
  nextRandom += 1;
  // 48 bits of milliseconds: the high 16 and the low 32, each exact in a double.
  const high = Math.floor(now / 2 ** 32);
  const low = now >>> 0;
  const pool = randomPool;
  return (
    HEX[(high >>> 8) & 0xff]! +
    HEX[high & 0xff]! +
    HEX[low >>> 24]! +
    HEX[(low >>> 16) & 0xff]! +
    '-' +
    HEX[(low >>> 8) & 0xff]! +
    HEX[low & 0xff]! +
    '-' +
    HEX[0x70 | (pool[r]! & 0x0f)]! +
    HEX[pool[r + 1]!]! +
    '-' +
    HEX[0x80 | (pool[r + 2]! & 0x3f)]! +
    HEX[pool[r + 3]!]! +
    '-' +
    HEX[pool[r + 4]!]! +
    HEX[pool[r + 5]!]! +
    HEX[pool[r + 6]!]! +
    HEX[pool[r + 7]!]! +
    HEX[pool[r + 8]!]! +
    HEX[pool[r + 9]!]!
  );
}
