import { type CryptoKey, createLocalJWKSet, errors, type JSONWebKeySet, type JWSHeaderParameters } from 'jose';
import type { Clock } from '../../lib/clock.ts';
import type { Logger } from '../../logger.ts';
import { Unauthorized, Unavailable } from '../errors.ts';
import { readLimited } from '../read-limited.ts';

/** How the issuer is reached; the system's `fetch` unless a test passes another. */
export type IssuerFetch = (url: string, init: RequestInit) => Promise<Response>;

export type IssuerKeysOptions = {
  /** `GITHUB_OIDC_ISSUER`, without a trailing slash: operator configuration, so its address is trusted. */
  issuer: string;
  clock: Clock;
  log: Logger;
  fetch?: IssuerFetch;
  /** Time limit of one request to the issuer. */
  timeoutMs?: number;
  /** Largest discovery document or key set read. */
  maxBytes?: number;
};

/** Keys are refetched for an unknown `kid` at most this often: a flood of made-up `kid`s does not flood the issuer. */
export const REFETCH_INTERVAL_MS = 60_000;
/** While no key set was ever read (the issuer was down at start), a retry is allowed this often. */
const FIRST_LOAD_RETRY_MS = 5_000;
/** Keys in use are reread this often even when every `kid` is known (a key the issuer withdrew stops working). */
const MAX_AGE_MS = 10 * 60_000;
const DEFAULT_TIMEOUT_MS = 5_000;
const DEFAULT_MAX_BYTES = 256 * 1024;

type KeySet = { jwks: ReturnType<typeof createLocalJWKSet> };

/**
 * The issuer's signing keys: its discovery document (`/.well-known/openid-configuration`) names
 * the JWKS; both are read with a time limit and a size limit, never following redirects. The key
 * set is cached; an unknown `kid` rereads it at most once a minute (every caller waiting on the
 * same read), and reads that fail count too, so no stream of tokens makes more than one request a
 * minute to the issuer.
 */
export class IssuerKeys {
  readonly #options: Required<Omit<IssuerKeysOptions, 'fetch'>> & { fetch: IssuerFetch };
  #keys: KeySet | undefined;
  /** When the last read began (whether it succeeded or not), and when the keys in hand were read. */
  #lastAttemptMs = -Infinity;
  #loadedMs = -Infinity;
  #inflight: Promise<void> | undefined;
  /** Reads of the issuer so far (tests and the log). */
  fetches = 0;

  constructor(options: IssuerKeysOptions) {
    this.#options = {
      issuer: options.issuer,
      clock: options.clock,
      log: options.log,
      timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
      maxBytes: options.maxBytes ?? DEFAULT_MAX_BYTES,
      fetch: options.fetch ?? ((url, init) => fetch(url, init)),
    };
  }

  /** The key that verifies a token with this header; `Unauthorized` when the issuer publishes none for its `kid`. */
  async keyFor(header: JWSHeaderParameters): Promise<CryptoKey> {
    const now = this.#nowMs();
    if (!this.#keys) {
      if (now - this.#lastAttemptMs < FIRST_LOAD_RETRY_MS && !this.#inflight) throw this.#unavailable('its keys could not be read a moment ago');
      await this.#reload();
    } else if (now - this.#loadedMs >= MAX_AGE_MS && now - this.#lastAttemptMs >= REFETCH_INTERVAL_MS) {
      // Stale keys are still used when the reread fails: the issuer being down must not stop tokens it signed.
      await this.#reload().catch(() => undefined);
    }
    try {
      return await this.#select(header);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
    }
    if (this.#inflight) await this.#inflight.catch(() => undefined);
    else if (this.#nowMs() - this.#lastAttemptMs >= REFETCH_INTERVAL_MS) await this.#reload().catch(() => undefined);
    try {
      return await this.#select(header);
    } catch (error) {
      if (error instanceof errors.JWKSNoMatchingKey) {
        throw new Unauthorized("The token's kid names no key the issuer publishes (the issuer's keys are reread for an unknown kid at most once a minute).");
      }
      throw error;
    }
  }

  #select(header: JWSHeaderParameters): Promise<CryptoKey> {
    if (!this.#keys) throw new errors.JWKSNoMatchingKey();
    // The protected header alone selects the key; the token itself is never needed here.
    return this.#keys.jwks(header, undefined as never) as Promise<CryptoKey>;
  }

  #nowMs(): number {
    return Date.parse(this.#options.clock.now());
  }

  /** One read at a time: callers that arrive during a read wait for it instead of starting their own. */
  #reload(): Promise<void> {
    this.#inflight ??= this.#read().finally(() => {
      this.#inflight = undefined;
    });
    return this.#inflight;
  }

  async #read(): Promise<void> {
    this.#lastAttemptMs = this.#nowMs();
    this.fetches += 1;
    const { issuer, log } = this.#options;
    try {
      const discovery = await this.#getJson(`${issuer}/.well-known/openid-configuration`);
      if (typeof discovery !== 'object' || discovery === null) throw new Error('the discovery document is not a JSON object');
      const { issuer: named, jwks_uri: jwksUri } = discovery as { issuer?: unknown; jwks_uri?: unknown };
      if (named !== issuer && named !== `${issuer}/`) throw new Error('the discovery document names another issuer');
      if (typeof jwksUri !== 'string' || !/^https?:\/\//i.test(jwksUri)) throw new Error('the discovery document has no http(s) jwks_uri');
      const jwks = (await this.#getJson(jwksUri)) as JSONWebKeySet;
      if (!Array.isArray(jwks?.keys)) throw new Error('the JWKS has no keys array');
      this.#keys = { jwks: createLocalJWKSet(jwks) };
      this.#loadedMs = this.#nowMs();
      log.info('github oidc: issuer keys read', { issuer, keys: jwks.keys.length });
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      log.warn('github oidc: could not read the issuer keys', { issuer, problem: reason });
      throw this.#unavailable(reason);
    }
  }

  async #getJson(url: string): Promise<unknown> {
    const { timeoutMs, maxBytes } = this.#options;
    let response: Response;
    try {
      response = await this.#options.fetch(url, { redirect: 'error', signal: AbortSignal.timeout(timeoutMs), headers: { accept: 'application/json' } });
    } catch (error) {
      throw new Error(`${url} could not be reached (${error instanceof Error ? error.message : String(error)})`);
    }
    if (response.status !== 200) {
      await response.body?.cancel().catch(() => undefined);
      throw new Error(`${url} answered HTTP ${response.status}`);
    }
    let bytes: Uint8Array;
    try {
      bytes = await readLimited(response, maxBytes);
    } catch {
      throw new Error(`${url} answered more than ${maxBytes} bytes, or stopped answering`);
    }
    try {
      return JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      throw new Error(`${url} did not answer JSON`);
    }
  }

  #unavailable(reason: string): Unavailable {
    const retryAfterSeconds = this.#keys ? Math.ceil(REFETCH_INTERVAL_MS / 1000) : Math.ceil(FIRST_LOAD_RETRY_MS / 1000);
    return new Unavailable(`The GitHub OIDC issuer ${this.#options.issuer} could not be read (${reason}); retry shortly.`, { retryAfterSeconds });
  }
}
