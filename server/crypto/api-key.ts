import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const PREFIX = 'cpk_';

/** A new API key: shown once to its creator, stored only as its hash. */
export function generateApiKey(): string {
  return PREFIX + randomBytes(32).toString('base64url');
}

/** SHA-256 of the key, hex. Keys are long and random, so a fast hash is the right tool (no salt needed). */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Compares two hex digests without leaking where they differ. */
export function sameDigest(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
