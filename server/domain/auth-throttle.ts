import { TokenBucket, type TokenRate } from '../lib/token-bucket.ts';
import { TooManyRequests } from './errors.ts';

export type AuthThrottleOptions = {
  /** Failed attempts an address may make at once before it is slowed down. */
  burst: number;
  /** Failed attempts per minute an address regains (the bucket's refill rate). */
  perMinute: number;
  /** Addresses remembered at most; past it, failures of unremembered addresses share one bucket. */
  maxAddresses: number;
  now?: () => number;
};

/** Key hashes remembered per address as having authenticated from it. */
const GOOD_KEYS_PER_ADDRESS = 4;
/** How many of the least recently seen addresses are examined for eviction per new address. */
const EVICTION_SCAN = 32;
/**
 * A bucket moves to the back of the recency order at most this often. Moving it is a delete and a
 * set on a Map that lives in the old generation, and V8 rebuilds such a Map's hash table there every
 * few deletions: moved on every authenticated request, one busy client left ~150 bytes of
 * old-generation garbage per request, a full garbage collection every few seconds under load.
 */
const REORDER_AFTER_MS = 1_000;

type Bucket = { tokens: TokenBucket; goodKeys: string[]; placedAt: number };

/**
 * Slows down API-key guessing: a token bucket of failed attempts per client address (IPv6 per /64,
 * which one host usually owns whole). While an address's bucket is empty its requests are refused
 * with 429 before the key is even looked at, except for keys that already authenticated from that
 * address: a client behind the same NAT or proxy as a guesser keeps working with the key it used.
 *
 * Memory is bounded: at most `maxAddresses` buckets, least recently seen first to go once full
 * (a full bucket is the same as none). When every remembered address is still being slowed down,
 * failures of further addresses share one overflow bucket, so many addresses guess no faster
 * together than the table can hold.
 */
export class AuthThrottle {
  readonly #rate: TokenRate;
  readonly #max: number;
  readonly #now: () => number;
  /** In order of last use to the second (re-inserted on use, see REORDER_AFTER_MS), so the first entries are the stalest. */
  readonly #buckets = new Map<string, Bucket>();
  readonly #overflow: Bucket;

  constructor(options: AuthThrottleOptions) {
    this.#rate = { burst: options.burst, perSecond: options.perMinute / 60 };
    this.#max = options.maxAddresses;
    this.#now = options.now ?? (() => performance.now());
    this.#overflow = this.#newBucket(this.#now());
  }

  /** Throws `TooManyRequests` when `address` may not try a key now; `keyHash` is the hash of the key it sends. */
  admit(address: string | undefined, keyHash: string): void {
    if (address === undefined) return;
    const bucket = this.#buckets.get(groupOf(address)) ?? (this.#buckets.size >= this.#max ? this.#overflow : undefined);
    if (!bucket) return;
    const now = this.#now();
    if (bucket.tokens.available(now) >= 1 || bucket.goodKeys.includes(keyHash)) return;
    const seconds = Math.max(1, Math.ceil(bucket.tokens.secondsUntil(1, now)));
    throw new TooManyRequests(`Too many failed authentication attempts from this address; try again in ${seconds} s.`, seconds);
  }

  /** A key sent from `address` was not accepted. */
  failed(address: string | undefined): void {
    if (address === undefined) return;
    this.#bucketFor(groupOf(address), false).tokens.take(1, this.#now());
  }

  /** A key sent from `address` was accepted: it passes this address's throttle from now on. */
  succeeded(address: string | undefined, keyHash: string): void {
    if (address !== undefined) this.#succeededIn(groupOf(address), keyHash);
  }

  /**
   * `admit` then `succeeded`, for a key known to be good (one whose check is cached in memory): false
   * where `admit` would throw, and then nothing is recorded. The address's group (a regular
   * expression, splits for IPv6) is worked out once instead of once for each.
   */
  admitKnownKey(address: string | undefined, keyHash: string): boolean {
    if (address === undefined) return true;
    const group = groupOf(address);
    const remembered = this.#buckets.get(group);
    // The usual request (every GET the Action polls with): a key that already authenticated from
    // this address passes, and nothing is recorded but the bucket's recency; one look-up of the
    // address, where `#succeededIn` would look it up and search its keys a second time.
    if (remembered?.goodKeys.includes(keyHash)) {
      this.#keepRecent(group, remembered, this.#now());
      return true;
    }
    const bucket = remembered ?? (this.#buckets.size >= this.#max ? this.#overflow : undefined);
    if (bucket && !bucket.goodKeys.includes(keyHash) && bucket.tokens.available(this.#now()) < 1) return false;
    this.#succeededIn(group, keyHash);
    return true;
  }

  #succeededIn(group: string, keyHash: string): void {
    const bucket = this.#bucketFor(group, true);
    if (bucket.goodKeys.includes(keyHash)) return;
    bucket.goodKeys.push(keyHash);
    if (bucket.goodKeys.length > GOOD_KEYS_PER_ADDRESS) bucket.goodKeys.shift();
  }

  /** How many addresses are remembered (for tests and benchmarks). */
  get size(): number {
    return this.#buckets.size;
  }

  #newBucket(now: number): Bucket {
    return { tokens: new TokenBucket(this.#rate, now), goodKeys: [], placedAt: now };
  }

  /** The address's bucket, made when missing; `evictAny` lets a success push out even a busy bucket. */
  #bucketFor(group: string, evictAny: boolean): Bucket {
    let bucket = this.#buckets.get(group);
    const now = this.#now();
    if (bucket) {
      this.#keepRecent(group, bucket, now);
      return bucket;
    }
    if (this.#buckets.size >= this.#max && !this.#evictOne(evictAny)) return this.#overflow;
    bucket = this.#newBucket(now);
    this.#buckets.set(group, bucket);
    return bucket;
  }

  /** Moves the address's bucket to the back of the recency order, at most once a `REORDER_AFTER_MS`. */
  #keepRecent(group: string, bucket: Bucket, now: number): void {
    if (now - bucket.placedAt < REORDER_AFTER_MS) return;
    this.#buckets.delete(group);
    this.#buckets.set(group, bucket);
    bucket.placedAt = now;
  }

  #evictOne(evictAny: boolean): boolean {
    let scanned = 0;
    const now = this.#now();
    for (const [group, bucket] of this.#buckets) {
      if (evictAny || bucket.tokens.isFull(now)) {
        this.#buckets.delete(group);
        return true;
      }
      if ((scanned += 1) >= EVICTION_SCAN) break;
    }
    return false;
  }
}

/**
 * IPv4 addresses as they are (also when IPv4-mapped); IPv6 addresses by their /64 prefix. An IPv4
 * address first, and the rest in a function of its own: this one small enough for V8 to inline
 * into the key check it runs in on every request (with the IPv6 code in it, it ran as Maglev code
 * of its own: hot-paths-round-9.md).
 */
export function groupOf(address: string): string {
  return address.includes(':') ? ipv6GroupOf(address) : address;
}

function ipv6GroupOf(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const [head = '', tail = ''] = address.toLowerCase().split('%')[0]!.split('::');
  const left = head ? head.split(':') : [];
  const right = address.includes('::') ? (tail ? tail.split(':') : []) : [];
  const groups = [...left, ...Array(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
