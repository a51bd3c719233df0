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

/** A hex digest's bytes, for `sameDigestBytes` (made once where a digest is compared again and again). */
export function digestBytes(hex: string): Buffer {
  return Buffer.from(hex, 'hex');
}

/** Compares two digests' bytes without leaking where they differ. */
export function sameDigestBytes(left: Buffer, right: Buffer): boolean {
  return left.length === right.length && timingSafeEqual(left, right);
}

/** Compares two hex digests without leaking where they differ. */
export function sameDigest(a: string, b: string): boolean {
  return sameDigestBytes(digestBytes(a), digestBytes(b));
}
