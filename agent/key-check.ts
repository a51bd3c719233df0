import { createHash } from 'node:crypto';
import type { VerifyKeyResponse } from '../shared/schemas/agent.ts';

/** What the proxy does with a request's `X-Api-Key` for a deployment. */
export type KeyVerdict = 'allowed' | 'invalid' | 'other_workspace';

/** The longest an answer of the control plane is reused (contract §15: a revoked key stops within 30 s). */
export const MAX_KEY_CACHE_MS = 30_000;
/** Answers kept at most; the oldest goes first. */
const MAX_ENTRIES = 10_000;

/**
 * Asks the control plane whether an API key may read a deployment (`POST /v2/agent/verify-key`,
 * with the agent's token) and keeps each answer for `ttlMs` (at most 30 s), so a request costs a
 * round trip only once per key, deployment and period. Keys are held only as SHA-256 digests.
 * Concurrent questions about the same key and deployment share one request.
 */
export class KeyChecker {
  readonly #url: string;
  readonly #token: string;
  readonly #ttlMs: number;
  readonly #answers = new Map<string, { verdict: KeyVerdict; until: number }>();
  readonly #asking = new Map<string, Promise<KeyVerdict>>();

  constructor(options: { url: string; token: string; ttlMs: number }) {
    this.#url = `${options.url.replace(/\/+$/, '')}/v2/agent/verify-key`;
    this.#token = options.token;
    this.#ttlMs = Math.min(Math.max(0, options.ttlMs), MAX_KEY_CACHE_MS);
  }

  /** The verdict on `key` for `deploymentId`; throws when the control plane does not answer (the proxy then answers 503). */
  check(deploymentId: string, key: string): Promise<KeyVerdict> {
    const id = `${deploymentId}:${createHash('sha256').update(key).digest('hex')}`;
    const kept = this.#answers.get(id);
    if (kept && kept.until > Date.now()) return Promise.resolve(kept.verdict);
    const asking = this.#asking.get(id);
    if (asking) return asking;
    const question = this.#ask(deploymentId, key)
      .then((verdict) => {
        this.#answers.delete(id);
        if (this.#answers.size >= MAX_ENTRIES) this.#answers.delete(this.#answers.keys().next().value!);
        this.#answers.set(id, { verdict, until: Date.now() + this.#ttlMs });
        return verdict;
      })
      .finally(() => this.#asking.delete(id));
    this.#asking.set(id, question);
    return question;
  }

  async #ask(deploymentId: string, key: string): Promise<KeyVerdict> {
    const response = await fetch(this.#url, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.#token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ key, deployment_id: deploymentId }),
      signal: AbortSignal.timeout(10_000),
    });
    // A key the control plane's schema refuses (too long) is no key of anyone's.
    if (response.status === 422) return 'invalid';
    if (!response.ok) throw new Error(`the control plane answered ${response.status} to the key check`);
    const answer = (await response.json()) as VerifyKeyResponse;
    return answer.allowed ? 'allowed' : (answer.reason ?? 'invalid');
  }
}
