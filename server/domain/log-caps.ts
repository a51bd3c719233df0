import { TokenBucket } from '../lib/token-bucket.ts';
import type { RevisionLogCap } from '../store/types.ts';
import { TooManyRequests } from './errors.ts';

export type LogCapsConfig = {
  revisionMaxLines: number;
  revisionMaxBytes: number;
  tokenLinesPerSecond: number;
  tokenBytesPerSecond: number;
};

/** The marker line's text: the same words on both backends and in every process. */
export function truncationMarker(dropped: number): string {
  return `log truncated: ${dropped} lines dropped`;
}

/** Buckets remembered before the full ones (the same as none) are forgotten. */
const FORGET_FULL_PAST = 1000;

/**
 * The limits on what an agent may write to the log (docs/decisions/log-caps.md): a cap per
 * revision, kept by the store in the same transaction as the lines (so it holds across processes),
 * and a rate per agent token, kept here per process as a token bucket of lines and one of bytes
 * (a second's worth refills each second; a burst of two seconds' worth). Status changes are never
 * limited: a revision's end always lands, however much log came before it.
 */
export class LogCaps {
  readonly revision: RevisionLogCap;
  readonly #config: LogCapsConfig;
  readonly #buckets = new Map<string, { lines: TokenBucket; bytes: TokenBucket }>();

  constructor(config: LogCapsConfig) {
    this.#config = config;
    this.revision = { maxLines: config.revisionMaxLines, maxBytes: config.revisionMaxBytes, marker: truncationMarker };
  }

  /**
   * Takes `lines` lines of `bytes` bytes from the token's buckets, or throws `TooManyRequests`
   * with the seconds until they would fit (nothing taken). A request larger than a whole burst
   * is let through once the buckets are full, so an agent that batches is slowed, never stuck.
   */
  admit(tokenId: string, lines: number, bytes: number, nowMs: number = Date.now()): void {
    const { tokenLinesPerSecond: lineRate, tokenBytesPerSecond: byteRate } = this.#config;
    let bucket = this.#buckets.get(tokenId);
    if (!bucket) {
      bucket = {
        lines: new TokenBucket({ perSecond: lineRate, burst: 2 * lineRate }, nowMs),
        bytes: new TokenBucket({ perSecond: byteRate, burst: 2 * byteRate }, nowMs),
      };
      this.#buckets.set(tokenId, bucket);
    }
    const needLines = Math.min(lines, bucket.lines.burst);
    const needBytes = Math.min(bytes, bucket.bytes.burst);
    const wait = Math.max(bucket.lines.secondsUntil(needLines, nowMs), bucket.bytes.secondsUntil(needBytes, nowMs));
    if (wait > 0)
      throw new TooManyRequests(
        `This agent token writes log lines faster than ${lineRate} lines or ${byteRate} bytes a second (LOG_TOKEN_LINES_PER_SECOND, LOG_TOKEN_BYTES_PER_SECOND); retry after the Retry-After seconds.`,
        Math.max(1, Math.ceil(wait)),
      );
    bucket.lines.take(needLines, nowMs);
    bucket.bytes.take(needBytes, nowMs);
    if (this.#buckets.size > FORGET_FULL_PAST) this.#forgetFull(nowMs);
  }

  #forgetFull(nowMs: number): void {
    for (const [tokenId, bucket] of this.#buckets) if (bucket.lines.isFull(nowMs) && bucket.bytes.isFull(nowMs)) this.#buckets.delete(tokenId);
  }
}
