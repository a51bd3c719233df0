import type { GithubMintClaims, GithubTokenExchange, GithubTokenExchanged, GithubTrust } from '../../../shared/schemas/github-trust.ts';
import { generateApiKey, hashApiKey } from '../../crypto/api-key.ts';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../logger.ts';
import type { GithubTrustStore } from '../../store/github-trust.ts';
import type { Store } from '../../store/types.ts';
import { Forbidden, Unauthorized } from '../errors.ts';
import type { IssuerKeys } from './issuer-keys.ts';
import { matchTrust, REFUSED_EVENTS } from './match-trust.ts';
import { CLOCK_SKEW_SECONDS, type GithubClaims, verifyGithubToken } from './verify-token.ts';

/** How long a minted key works: at most an hour (contract section 13). */
export const MINTED_KEY_TTL_MS = 60 * 60 * 1000;

export type GithubTokenExchangeDeps = {
  store: Pick<Store, 'getWorkspace'>;
  trust: GithubTrustStore;
  keys: IssuerKeys;
  clock: Clock;
  log: Logger;
  issuer: string;
  /** The `aud` a token must carry (`GITHUB_OIDC_AUDIENCE`, else the public URL, known once the server listens). */
  audience: () => string;
};

/**
 * `POST /v1/auth/github-actions/token`: a verified GitHub Actions ID token that a workspace's trust
 * entry allows becomes a workspace-scoped API key of at most an hour, listed with the claims it
 * was minted for and revocable as any key. 401: the token is not good; 403: it is good but nothing
 * lets it in. The token's `jti` is recorded in the same transaction as the key, so one token mints
 * one key at most, whichever process it reaches.
 */
export class GithubTokenExchanger {
  readonly #deps: GithubTokenExchangeDeps;

  constructor(deps: GithubTokenExchangeDeps) {
    this.#deps = deps;
  }

  async exchange(body: GithubTokenExchange): Promise<GithubTokenExchanged> {
    try {
      return await this.#exchange(body);
    } catch (error) {
      // What was refused and why, never the token. At debug: the caller reads the same sentence in
      // its answer, and a flood of forged tokens must not become a flood of log lines.
      if (error instanceof Unauthorized || error instanceof Forbidden) this.#deps.log.debug('github oidc: exchange refused', { reason: error.message });
      throw error;
    }
  }

  async #exchange(body: GithubTokenExchange): Promise<GithubTokenExchanged> {
    const { clock, keys } = this.#deps;
    const nowIso = clock.now();
    const now = new Date(nowIso);
    const claims = await verifyGithubToken(body.token, {
      issuer: this.#deps.issuer,
      audience: this.#deps.audience(),
      now,
      keyFor: (header) => keys.keyFor(header),
    });
    if (claims.event_name !== undefined && REFUSED_EVENTS.has(claims.event_name)) {
      throw new Forbidden(
        `The token's event_name (${claims.event_name}) is refused: ${claims.event_name} workflows run code from elsewhere (a fork, another workflow) with the base repository's identity.`,
      );
    }
    const entry = await this.#trustedEntry(claims, body.workspace_id);
    const workspace = await this.#deps.store.getWorkspace(entry.workspace_id);
    if (!workspace) throw new Forbidden('The workspace that trusts this repository no longer exists.');

    const key = generateApiKey();
    const id = crypto.randomUUID();
    const expiresAt = new Date(now.getTime() + MINTED_KEY_TTL_MS).toISOString();
    const outcome = await this.#deps.trust.mintKey({
      jti: claims.jti,
      // After this the token is refused as expired anyway, so its jti need not be remembered longer.
      jtiExpiresAt: new Date((claims.exp + CLOCK_SKEW_SECONDS) * 1000).toISOString(),
      now: nowIso,
      key: {
        id,
        organization_id: workspace.organization_id,
        workspace_id: workspace.id,
        key_hash: hashApiKey(key),
        description: `GitHub Actions: ${claims.repository}${claims.ref ? ` ${claims.ref}` : ''}${claims.run_id ? ` run ${claims.run_id}` : ''}`.slice(0, 500),
        created_at: nowIso,
        expires_at: expiresAt,
        minted_for: JSON.stringify(mintClaims(claims, entry)),
      },
    });
    if (outcome === 'jti-used') throw new Unauthorized('This token was exchanged before: each token (its jti) is used once; request a new one.');
    this.#deps.log.info('github oidc: key minted', {
      key_id: id,
      workspace_id: workspace.id,
      repository: claims.repository,
      repository_id: claims.repository_id,
      ref: claims.ref,
      run_id: claims.run_id,
      trust_id: entry.id,
      expires_at: expiresAt,
    });
    return { api_key: key, expires_at: expiresAt, workspace_id: workspace.id, key_id: id };
  }

  /** The entry that lets the token in: one workspace's, the earliest made of those that match. */
  async #trustedEntry(claims: GithubClaims, workspaceId: string | undefined): Promise<GithubTrust> {
    const all = await this.#deps.trust.forRepository(claims.repository_id);
    const candidates = workspaceId === undefined ? all : all.filter((entry) => entry.workspace_id === workspaceId);
    if (candidates.length === 0) {
      throw new Forbidden(
        `No trust entry${workspaceId ? ' of the workspace named in workspace_id' : ''} names the token's repository_id (${claims.repository_id}, repository ${claims.repository}).`,
      );
    }
    const { matched, mismatch } = matchTrust(candidates, claims);
    if (matched.length === 0) {
      const value = mismatch ? claims[mismatch] : undefined;
      throw new Forbidden(
        `No trust entry allows the token's ${mismatch ?? 'claims'}${typeof value === 'string' ? ` (${value})` : ''} for repository_id ${claims.repository_id}.`,
      );
    }
    const workspaces = new Set(matched.map((entry) => entry.workspace_id));
    if (workspaces.size > 1) throw new Forbidden('More than one workspace trusts this token: name the one to deploy in with workspace_id.');
    return matched[0]!;
  }
}

function mintClaims(claims: GithubClaims, entry: GithubTrust): GithubMintClaims {
  return {
    trust_id: entry.id,
    repository: claims.repository,
    repository_id: claims.repository_id,
    repository_owner: claims.repository_owner,
    repository_owner_id: claims.repository_owner_id,
    ref: claims.ref ?? null,
    environment: claims.environment ?? null,
    job_workflow_ref: claims.job_workflow_ref ?? null,
    event_name: claims.event_name ?? null,
    workflow: claims.workflow ?? null,
    actor: claims.actor ?? null,
    run_id: claims.run_id ?? null,
    run_attempt: claims.run_attempt ?? null,
    sha: claims.sha ?? null,
    sub: claims.sub,
    jti: claims.jti,
  };
}
