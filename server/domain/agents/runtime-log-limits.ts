/**
 * How many runtime log lines (an agent server's output after `DEPLOYED`) the control plane stores:
 * a token bucket per deployment and one per agent token, and a cap per revision. A server that
 * floods its output costs the database at most the bucket's rate, and at most the cap in all.
 *
 * The counts live in this server process (they start over when it restarts, and each process of a
 * PostgreSQL deployment keeps its own): the rate still bounds how fast the log can grow.
 */
export type RuntimeLogLimitsOptions = {
  /** Lines per second a deployment may add, and the burst it may send at once. */
  perDeploymentPerSecond: number;
  deploymentBurst: number;
  /** Lines per second all deployments of one agent token may add together, and their burst. */
  perTokenPerSecond: number;
  tokenBurst: number;
  /** Runtime lines stored per revision at most. */
  maxLinesPerRevision: number;
  /** Buckets and counts remembered at most (the oldest are forgotten first): bounds this object's memory. */
  maxEntries: number;
};

export const DEFAULT_RUNTIME_LOG_LIMITS: RuntimeLogLimitsOptions = {
  perDeploymentPerSecond: 50,
  deploymentBurst: 500,
  perTokenPerSecond: 200,
  tokenBurst: 2000,
  maxLinesPerRevision: 20_000,
  maxEntries: 10_000,
};

type Bucket = { tokens: number; at: number };

export class RuntimeLogLimits {
  readonly #options: RuntimeLogLimitsOptions;
  readonly #now: () => number;
  readonly #deployments = new Map<string, Bucket>();
  readonly #tokens = new Map<string, Bucket>();
  readonly #stored = new Map<string, number>();

  constructor(options: Partial<RuntimeLogLimitsOptions> = {}, now: () => number = Date.now) {
    this.#options = { ...DEFAULT_RUNTIME_LOG_LIMITS, ...options };
    this.#now = now;
  }

  /** How many of `wanted` lines may be stored now for this revision of this deployment, sent with this token. */
  admit(input: { deploymentId: string; revisionId: string; tokenId: string; wanted: number }): number {
    const o = this.#options;
    const deployment = this.#bucket(this.#deployments, input.deploymentId, o.perDeploymentPerSecond, o.deploymentBurst);
    const token = this.#bucket(this.#tokens, input.tokenId, o.perTokenPerSecond, o.tokenBurst);
    const stored = this.#stored.get(input.revisionId) ?? 0;
    const admitted = Math.max(0, Math.min(input.wanted, Math.floor(deployment.tokens), Math.floor(token.tokens), o.maxLinesPerRevision - stored));
    deployment.tokens -= admitted;
    token.tokens -= admitted;
    remember(this.#stored, input.revisionId, stored + admitted, o.maxEntries);
    return admitted;
  }

  #bucket(map: Map<string, Bucket>, key: string, perSecond: number, burst: number): Bucket {
    const now = this.#now();
    const bucket = map.get(key) ?? { tokens: burst, at: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.at) / 1000) * perSecond);
    bucket.at = now;
    remember(map, key, bucket, this.#options.maxEntries);
    return bucket;
  }
}

/** Sets `key` as the newest entry; past `max` entries the oldest is forgotten. */
function remember<V>(map: Map<string, V>, key: string, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) map.delete(map.keys().next().value as string);
}
