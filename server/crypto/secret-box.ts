import { createCipheriv, createDecipheriv, createSecretKey, hkdfSync, type KeyObject, randomFillSync } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
/** IVs drawn from the system's CSPRNG at once, a pool's worth (341 IVs) per call. */
const IV_POOL_BYTES = IV_BYTES * 341;

/**
 * AES-256-GCM encryption of values kept at rest (deployment secrets, OAuth client secrets and
 * tokens). The output is `v1:<iv>:<tag>:<ciphertext>` in base64url, so the format can change later.
 */
export class SecretBox {
  // A KeyObject made once: passing raw bytes would rebuild one on every call (measurable on reads).
  readonly #key: KeyObject;
  /**
   * Random IVs not used yet. `randomBytes(12)` on every encryption would be a call into the CSPRNG
   * per create (~1.7 µs of ~6 in a profile of POST deployment); drawing many at once and using each slice
   * once keeps every IV as random and as unrepeated, as Node's own `randomUUID` does with its pool.
   */
  #ivPool = Buffer.alloc(0);
  #ivAt = 0;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error('The encryption key must be 32 bytes');
    this.#key = createSecretKey(key);
  }

  encrypt(plaintext: string): string {
    const iv = this.#nextIv();
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join(':');
  }

  #nextIv(): Buffer {
    if (this.#ivAt + IV_BYTES > this.#ivPool.length) {
      // A fresh buffer rather than refilled in place: an IV handed out never changes under its holder.
      this.#ivPool = randomFillSync(Buffer.allocUnsafe(IV_POOL_BYTES));
      this.#ivAt = 0;
    }
    const iv = this.#ivPool.subarray(this.#ivAt, this.#ivAt + IV_BYTES);
    this.#ivAt += IV_BYTES;
    return iv;
  }

  decrypt(sealed: string): string {
    const [version, iv, tag, ciphertext] = sealed.split(':');
    if (version !== VERSION || iv === undefined || tag === undefined || ciphertext === undefined) {
      throw new Error('Unrecognised encrypted value');
    }
    const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
  }

  /**
   * A 32-byte key for one purpose (e.g. signing upload URLs), derived with HKDF from the encryption
   * key: no second secret to configure, and the encryption key itself never signs anything.
   */
  deriveKey(purpose: string): Buffer {
    return Buffer.from(hkdfSync('sha256', this.#key.export(), Buffer.alloc(0), purpose, 32));
  }

  encryptJson(value: unknown): string {
    return this.encrypt(JSON.stringify(value));
  }

  decryptJson<T>(sealed: string): T {
    return JSON.parse(this.decrypt(sealed)) as T;
  }
}
