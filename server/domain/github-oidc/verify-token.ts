import { type CryptoKey, decodeProtectedHeader, errors, type JWSHeaderParameters, jwtVerify } from 'jose';
import { z } from 'zod';
import { lazySchema } from '../../../shared/schemas/lazy.ts';
import { DomainError, Unauthorized } from '../errors.ts';

/** Seconds of clock difference allowed on `exp`, `nbf` and `iat` (contract section 13). */
export const CLOCK_SKEW_SECONDS = 60;

/** GitHub sends ids as decimal strings; a number is read the same way. */
const DecimalId = lazySchema(() => z.union([z.string().regex(/^\d{1,20}$/), z.number().int().nonnegative()]).transform(String));
const Text = lazySchema(() => z.string().max(1024));

/** The claims of a GitHub Actions ID token this server reads (the token has more). */
export const GithubClaims = lazySchema(() =>
  z.object({
    sub: Text,
    jti: z.string().min(1).max(256),
    exp: z.number(),
    iat: z.number(),
    repository: Text,
    repository_id: DecimalId,
    repository_owner: Text,
    repository_owner_id: DecimalId,
    ref: Text.optional(),
    environment: Text.optional(),
    job_workflow_ref: Text.optional(),
    event_name: Text.optional(),
    workflow: Text.optional(),
    actor: Text.optional(),
    run_id: z.union([Text, z.number()]).transform(String).optional(),
    run_attempt: z.union([Text, z.number()]).transform(String).optional(),
    sha: Text.optional(),
  }),
);
export type GithubClaims = z.infer<typeof GithubClaims>;

export type VerifyOptions = {
  issuer: string;
  audience: string;
  now: Date;
  keyFor: (header: JWSHeaderParameters) => Promise<CryptoKey>;
};

/**
 * Verifies a GitHub Actions OIDC ID token: RS256 only (never `none`, never an HMAC whose secret
 * would be the public key), signed by a key the issuer publishes, issuer, audience, `exp` / `nbf`
 * / `iat` within 60 s of skew, and GitHub's claims present. Every refusal is `Unauthorized` with a
 * sentence naming what is wrong; no sentence contains the token. The `jti` is checked later, when
 * the key is minted (it must be recorded in the same transaction).
 */
export async function verifyGithubToken(token: string, options: VerifyOptions): Promise<GithubClaims> {
  let header: JWSHeaderParameters;
  try {
    if (token.split('.').length !== 3) throw new Error('not three parts');
    header = decodeProtectedHeader(token) as JWSHeaderParameters;
  } catch {
    throw new Unauthorized('The token is not a signed JWT (three base64url parts with a JSON header).');
  }
  // Checked before any key is looked up, so a forged header never makes the server read the issuer.
  if (header.alg !== 'RS256') throw new Unauthorized('The token header names an alg other than RS256; only RS256 is accepted.');
  if (typeof header.kid !== 'string' || header.kid === '') throw new Unauthorized('The token header has no kid naming the key that signed it.');
  let payload: unknown;
  try {
    ({ payload } = await jwtVerify(token, (h) => options.keyFor(h), {
      // A trailing slash is no other issuer or audience: configuration and tokens differ on it in practice.
      issuer: withAndWithoutSlash(options.issuer),
      audience: withAndWithoutSlash(options.audience),
      algorithms: ['RS256'],
      clockTolerance: CLOCK_SKEW_SECONDS,
      currentDate: options.now,
      requiredClaims: ['exp', 'iat', 'jti', 'sub'],
    }));
  } catch (error) {
    throw refusal(error, options);
  }
  const claims = GithubClaims.safeParse(payload);
  if (!claims.success) {
    const claim = claims.error.issues[0]?.path[0] ?? 'claims';
    throw new Unauthorized(`The token's ${String(claim)} claim is missing or malformed: is it a GitHub Actions ID token?`);
  }
  // jose checks `iat` against the clock only with maxTokenAge; a token "issued" in the future is refused here.
  if (claims.data.iat > options.now.getTime() / 1000 + CLOCK_SKEW_SECONDS)
    throw new Unauthorized("The token's iat claim is in the future (beyond 60 s of clock skew).");
  return claims.data;
}

function withAndWithoutSlash(value: string): string[] {
  const bare = value.replace(/\/+$/, '');
  return [bare, `${bare}/`];
}

/** The sentence for what jose refused: the claim or step that failed, never the token. */
function refusal(error: unknown, options: VerifyOptions): Error {
  if (error instanceof DomainError) return error;
  if (error instanceof errors.JWTExpired)
    return new Unauthorized('The token has expired (its exp claim has passed, beyond 60 s of clock skew); request a new one.');
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'aud':
        return new Unauthorized(`The token's aud claim is not this server's audience (${options.audience}); request the token with that audience.`);
      case 'iss':
        return new Unauthorized(`The token's iss claim is not the configured issuer (${options.issuer}).`);
      case 'nbf':
        return new Unauthorized("The token's nbf claim is in the future (beyond 60 s of clock skew).");
      case 'iat':
        return new Unauthorized("The token's iat claim is malformed or in the future.");
      default:
        return new Unauthorized(`The token's ${error.claim} claim is ${error.reason === 'missing' ? 'missing' : 'invalid'}.`);
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return new Unauthorized('The token header names an alg other than RS256; only RS256 is accepted.');
  if (error instanceof errors.JWSSignatureVerificationFailed)
    return new Unauthorized("The token's signature does not verify with the issuer's key its kid names.");
  if (error instanceof errors.JWKSMultipleMatchingKeys) return new Unauthorized("The token's kid names more than one key of the issuer.");
  if (error instanceof errors.JOSEError) return new Unauthorized(`The token could not be verified (${error.code}).`);
  return error instanceof Error ? error : new Error(String(error));
}
