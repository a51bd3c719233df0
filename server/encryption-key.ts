import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Logger } from './logger.ts';

/**
 * The key for values encrypted at rest: `ENCRYPTION_KEY` (32 bytes, base64) when set; otherwise
 * a key generated once and kept beside the database (`<database>.key`, mode 0600), with a warning.
 */
export function loadEncryptionKey(configured: string | undefined, databasePath: string, log: Logger): Buffer {
  if (configured) {
    const key = Buffer.from(configured, 'base64');
    if (key.length !== 32) throw new Error('ENCRYPTION_KEY must be 32 bytes, base64-encoded (openssl rand -base64 32).');
    return key;
  }
  if (databasePath === ':memory:') return randomBytes(32);
  const keyFile = `${databasePath}.key`;
  if (existsSync(keyFile)) return Buffer.from(readFileSync(keyFile, 'utf8').trim(), 'base64');
  const key = randomBytes(32);
  writeFileSync(keyFile, `${key.toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  log.warn('ENCRYPTION_KEY is not set: generated a key and kept it beside the database; set ENCRYPTION_KEY in production', { key_file: keyFile });
  return key;
}
