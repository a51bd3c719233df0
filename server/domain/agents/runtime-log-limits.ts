import type { Config } from '../../config.ts';
import { TokenBucket, type TokenRate } from '../../lib/token-bucket.ts';

/** Buckets remembered at most per kind (the least recently used are forgotten first): bounds this object's memory. */
const MAX_BUCKETS = 10_000;

export type RuntimeLogLimitsConfig = Pick<
  Config,
  'RUNTIME_LOG_LINES_PER_SECOND' | 'RUNTIME_LOG_BURST' | 'RUNTIME_LOG_TOKEN_LINES_PER_SECOND' | 'RUNTIME_LOG_TOKEN_BURST'
>;

/**
 * How fast runtime log lines (an agent server's output after `DEPLOYED`) are stored: a token
 * bucket per deployment and one per agent token, so a server that floods its output costs the
 * database at most the bucket's rate. How many a revision keeps in all is the store's cap
 * (`LOG_REVISION_MAX_LINES`, across processes), not this object's.
 *
 * The buckets live in this server process (they start full when it restarts, and each process of
 * a PostgreSQL deployment keeps its own): the rate still bounds how fast the log can grow.
 */
export class RuntimeLogLimits {
  readonly #deploymentRate: TokenRate;
  readonly #tokenRate: TokenRate;
  readonly #deployments = new Map<string, TokenBucket>();
  readonly #tokens = new Map<string, TokenBucket>();

  constructor(config: RuntimeLogLimitsConfig) {
    this.#deploymentRate = { perSecond: config.RUNTIME_LOG_LINES_PER_SECOND, burst: config.RUNTIME_LOG_BURST };
    this.#tokenRate = { perSecond: config.RUNTIME_LOG_TOKEN_LINES_PER_SECOND, burst: config.RUNTIME_LOG_TOKEN_BURST };
  }

  /** How many of `wanted` lines may be stored now for this deployment, sent with this token. */
  admit(input: { deploymentId: string; tokenId: string; wanted: number; nowMs: number }): number {
    const deployment = bucketOf(this.#deployments, input.deploymentId, this.#deploymentRate, input.nowMs);
    const token = bucketOf(this.#tokens, input.tokenId, this.#tokenRate, input.nowMs);
    const admitted = Math.min(input.wanted, Math.floor(deployment.available(input.nowMs)), Math.floor(token.available(input.nowMs)));
    if (admitted <= 0) return 0;
    deployment.take(admitted, input.nowMs);
    token.take(admitted, input.nowMs);
    return admitted;
  }
}

/** The key's bucket, made when missing, moved to the newest place; past `MAX_BUCKETS` the oldest is forgotten. */
function bucketOf(buckets: Map<string, TokenBucket>, key: string, rate: TokenRate, nowMs: number): TokenBucket {
  const bucket = buckets.get(key) ?? new TokenBucket(rate, nowMs);
  buckets.delete(key);
  buckets.set(key, bucket);
  if (buckets.size > MAX_BUCKETS) buckets.delete(buckets.keys().next().value as string);
  return bucket;
}
