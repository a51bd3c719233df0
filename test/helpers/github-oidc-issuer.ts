import { createHmac, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type JWK, SignJWT } from 'jose';
import { TEST_KEEP_ALIVE_MS } from './keep-alive.ts';

/**
 * A local stand-in for GitHub's Actions token service, on a loopback port: the OIDC discovery
 * document, the JWKS, RS256 ID tokens with GitHub's claim set, and the runner's
 * `ACTIONS_ID_TOKEN_REQUEST_URL` endpoint (a GET with `Authorization: Bearer
 * $ACTIONS_ID_TOKEN_REQUEST_TOKEN`, `&audience=…` appended, answering `{"value": <token>}`). Real
 * keys, real signatures, real HTTP; only the workflow run the claims describe is made up.
 */
export type GithubClaimSet = {
  sub: string;
  repository: string;
  repository_id: string;
  repository_owner: string;
  repository_owner_id: string;
  repository_visibility: string;
  ref: string;
  ref_type: string;
  ref_protected: string;
  sha: string;
  environment?: string;
  job_workflow_ref: string;
  job_workflow_sha: string;
  workflow: string;
  workflow_ref: string;
  workflow_sha: string;
  event_name: string;
  actor: string;
  actor_id: string;
  run_id: string;
  run_number: string;
  run_attempt: string;
  runner_environment: string;
  head_ref: string;
  base_ref: string;
  [claim: string]: unknown;
};

type SigningKey = { kid: string; privateKey: KeyObject; publicJwk: JWK };

export type TokenOptions = {
  /** Claims that replace (or, with `undefined`, remove) the defaults. */
  claims?: Partial<Record<string, unknown>>;
  /** The `aud` claim (default: the issuer's `audience`). */
  audience?: string;
  /** Seconds from now. */
  expiresIn?: number;
  issuedAt?: number;
  notBefore?: number;
  /** Sign with a key the issuer does not publish (under the published kid unless `kid` is given). */
  unpublishedKey?: boolean;
  kid?: string;
  /** Sign as `alg: none` or HS256 (keyed with the published public key, the classic confusion attack). */
  alg?: 'none' | 'HS256';
  issuer?: string;
};

function makeKey(kid: string): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = publicKey.export({ format: 'jwk' }) as JWK;
  return { kid, privateKey, publicJwk: { ...jwk, kid, alg: 'RS256', use: 'sig' } };
}

export class GithubOidcIssuer {
  readonly audience: string;
  url = '';
  /** The bearer token the runner endpoint wants (`ACTIONS_ID_TOKEN_REQUEST_TOKEN`). */
  readonly requestToken = `runner-${crypto.randomUUID()}`;
  /** Requests by path (`/.well-known/jwks`, …): what the server under test asked for. */
  readonly hits = new Map<string, number>();
  /** The `audience` query of each runner request. */
  readonly runnerAudiences: string[] = [];
  /** Claims of the tokens the runner endpoint hands out (the workflow run the Action runs in). */
  runnerClaims: Partial<Record<string, unknown>> = {};
  #server: Server | undefined;
  #published: SigningKey[] = [makeKey(`key-${crypto.randomUUID().slice(0, 8)}`)];
  readonly #unpublished = makeKey('unpublished');

  constructor(audience = 'https://control-plane.example.test') {
    this.audience = audience;
  }

  async start(): Promise<this> {
    this.#server = createServer((req, res) => this.#answer(req, res));
    // The server under test calls it: its idle connections outlive any wait of a test (keep-alive.ts).
    this.#server.keepAliveTimeout = TEST_KEEP_ALIVE_MS;
    await new Promise<void>((resolve) => this.#server!.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.#server ? this.#server.close(() => resolve()) : resolve()));
  }

  /** `ACTIONS_ID_TOKEN_REQUEST_URL` as a runner sets it (it already has a query; the client appends `&audience=`). */
  get runnerTokenUrl(): string {
    return `${this.url}/_runner/idtoken?api-version=2.0`;
  }

  get kid(): string {
    return this.#published[0]!.kid;
  }

  hitCount(path: string): number {
    return this.hits.get(path) ?? 0;
  }

  /** Publishes a new signing key first in the set (as GitHub does when it rotates), keeping the old one. */
  rotate(): string {
    const key = makeKey(`key-${crypto.randomUUID().slice(0, 8)}`);
    this.#published = [key, ...this.#published];
    return key.kid;
  }

  /** GitHub's claim set for a push to `main` of repository `acme/agent` (ids 4242 and 77), overridable. */
  defaultClaims(): GithubClaimSet {
    const runId = String(1_000_000 + Math.floor(Math.random() * 1_000_000));
    return {
      sub: 'repo:acme/agent:ref:refs/heads/main',
      repository: 'acme/agent',
      repository_id: '4242',
      repository_owner: 'acme',
      repository_owner_id: '77',
      repository_visibility: 'private',
      ref: 'refs/heads/main',
      ref_type: 'branch',
      ref_protected: 'true',
      sha: '0123456789abcdef0123456789abcdef01234567',
      job_workflow_ref: 'acme/agent/.github/workflows/deploy.yml@refs/heads/main',
      job_workflow_sha: '0123456789abcdef0123456789abcdef01234567',
      workflow: 'deploy',
      workflow_ref: 'acme/agent/.github/workflows/deploy.yml@refs/heads/main',
      workflow_sha: '0123456789abcdef0123456789abcdef01234567',
      event_name: 'push',
      actor: 'octocat',
      actor_id: '583231',
      run_id: runId,
      run_number: '17',
      run_attempt: '1',
      runner_environment: 'github-hosted',
      head_ref: '',
      base_ref: '',
    };
  }

  /** An ID token as GitHub signs one (RS256, `kid` of the current key), or a forged one as `options` say. */
  async token(options: TokenOptions = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    const claims: Record<string, unknown> = { ...this.defaultClaims(), ...options.claims };
    for (const [name, value] of Object.entries(options.claims ?? {})) if (value === undefined) delete claims[name];
    const payload = {
      ...claims,
      jti: (options.claims?.jti as string | undefined) ?? crypto.randomUUID(),
      iss: options.issuer ?? this.url,
      aud: options.audience ?? this.audience,
      iat: options.issuedAt ?? now,
      nbf: options.notBefore ?? now - 5,
      exp: now + (options.expiresIn ?? 300),
    };
    const key = options.unpublishedKey ? this.#unpublished : this.#published[0]!;
    const kid = options.kid ?? (options.unpublishedKey ? this.kid : key.kid);
    if (options.alg === 'none' || options.alg === 'HS256') {
      const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
      const signingInput = `${encode({ alg: options.alg, typ: 'JWT', kid })}.${encode(payload)}`;
      if (options.alg === 'none') return `${signingInput}.`;
      const secret = Buffer.from(JSON.stringify(this.#published[0]!.publicJwk));
      return `${signingInput}.${createHmac('sha256', secret).update(signingInput).digest('base64url')}`;
    }
    return new SignJWT(payload).setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid }).sign(key.privateKey);
  }

  #answer(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', this.url);
    this.hits.set(url.pathname, this.hitCount(url.pathname) + 1);
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method === 'GET' && url.pathname === '/.well-known/openid-configuration') {
      json(200, {
        issuer: this.url,
        jwks_uri: `${this.url}/.well-known/jwks`,
        subject_types_supported: ['public', 'pairwise'],
        response_types_supported: ['id_token'],
        claims_supported: [
          'sub',
          'aud',
          'exp',
          'iat',
          'iss',
          'jti',
          'nbf',
          'ref',
          'repository',
          'repository_id',
          'repository_owner',
          'repository_owner_id',
          'run_id',
          'run_number',
          'run_attempt',
          'actor',
          'actor_id',
          'workflow',
          'head_ref',
          'base_ref',
          'event_name',
          'ref_type',
          'environment',
          'job_workflow_ref',
        ],
        id_token_signing_alg_values_supported: ['RS256'],
        scopes_supported: ['openid'],
      });
      return;
    }
    if (req.method === 'GET' && url.pathname === '/.well-known/jwks') {
      json(200, { keys: this.#published.map((key) => key.publicJwk) });
      return;
    }
    if (req.method === 'GET' && url.pathname === '/_runner/idtoken') {
      if (req.headers.authorization !== `Bearer ${this.requestToken}`) {
        json(401, { message: 'Bad runner token' });
        return;
      }
      const audience = url.searchParams.get('audience') ?? `https://github.com/${this.defaultClaims().repository_owner}`;
      this.runnerAudiences.push(audience);
      this.token({ audience, claims: this.runnerClaims }).then(
        (value) => json(200, { count: 1, value }),
        (error: unknown) => json(500, { message: String(error) }),
      );
      return;
    }
    json(404, { message: 'Not Found' });
  }
}
