import type { KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';

/**
 * An App JWT (RS256) for calls made as the App itself: `iat` 60 s back (GitHub's advice for
 * clocks that drift) and `exp` 9 minutes ahead, inside GitHub's 10-minute ceiling even with a
 * minute of drift the other way. Signed with jose, the JOSE library the server already depends on.
 */
export async function appJwt(appId: string, privateKey: KeyObject, nowMs: number): Promise<string> {
  const now = Math.floor(nowMs / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
    .setIssuer(appId)
    .setIssuedAt(now - 60)
    .setExpirationTime(now + 9 * 60)
    .sign(privateKey);
}
