import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../../server/crypto/secret-box.ts';

/** AES-256-GCM at rest, its IVs drawn from a pool of CSPRNG bytes: each used once. */
describe('SecretBox', () => {
  it('gives every encryption an IV of its own across several pools, and each value decrypts to what was sealed', () => {
    const box = new SecretBox(randomBytes(32));
    const sealed = Array.from({ length: 2000 }, (_, i) => ({ plain: `secret-${i}`, text: box.encrypt(`secret-${i}`) }));
    const ivs = sealed.map(({ text }) => text.split(':')[1]!);
    for (const iv of ivs) expect(Buffer.from(iv, 'base64url')).toHaveLength(12);
    expect(new Set(ivs).size).toBe(2000);
    // Values sealed from earlier pools still open: a new pool never overwrote an IV already used.
    for (const { plain, text } of sealed) expect(box.decrypt(text)).toBe(plain);
    // The same plaintext twice: different ciphertexts.
    expect(box.encrypt('same')).not.toBe(box.encrypt('same'));
  });

  it('refuses a value changed at rest and a value sealed under another key', () => {
    const box = new SecretBox(randomBytes(32));
    const [version, iv, tag, ciphertext] = box.encryptJson([{ name: 'A', value: 'b' }]).split(':') as [string, string, string, string];
    const flipped = Buffer.from(ciphertext, 'base64url');
    flipped[0] = flipped[0]! ^ 1;
    expect(() => box.decrypt([version, iv, tag, flipped.toString('base64url')].join(':'))).toThrow();
    expect(() => new SecretBox(randomBytes(32)).decrypt([version, iv, tag, ciphertext].join(':'))).toThrow();
    expect(box.decryptJson([version, iv, tag, ciphertext].join(':'))).toEqual([{ name: 'A', value: 'b' }]);
  });
});
