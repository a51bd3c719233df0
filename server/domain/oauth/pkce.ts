import { createHash, randomBytes } from 'node:crypto';
import type { CodeChallengeMethod } from '../../../shared/schemas/oauth.ts';

/** A fresh PKCE code verifier: 43 characters of base64url from 32 random bytes (RFC 7636 §4.1). */
export function newCodeVerifier(): string {
  return randomBytes(32).toString('base64url');
}

/** The code challenge sent in the authorization URL for `verifier` (RFC 7636 §4.2). */
export function codeChallenge(verifier: string, method: CodeChallengeMethod): string {
  return method === 'S256' ? createHash('sha256').update(verifier, 'ascii').digest('base64url') : verifier;
}

/** An unguessable `state` value; only its hash is stored, so a database reader cannot forge a callback. */
export function newState(): string {
  return randomBytes(32).toString('base64url');
}

export function hashState(state: string): string {
  return createHash('sha256').update(state, 'utf8').digest('hex');
}
