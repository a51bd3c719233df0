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

/** Buckets idle this long are full again and forgotten, so the map holds only tokens writing now. */
const IDLE_FORGET_MS = 10_000;

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
  readonly #buckets = new Map<string, { lines: number; bytes: number; at: number }>();

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
    const burstLines = 2 * lineRate;
    const burstBytes = 2 * byteRate;
    const bucket = this.#buckets.get(tokenId) ?? { lines: burstLines, bytes: burstBytes, at: nowMs };
    const elapsed = Math.max(0, nowMs - bucket.at) / 1000;
    const haveLines = Math.min(burstLines, bucket.lines + elapsed * lineRate);
    const haveBytes = Math.min(burstBytes, bucket.bytes + elapsed * byteRate);
    const needLines = Math.min(lines, burstLines);
    const needBytes = Math.min(bytes, burstBytes);
    if (haveLines < needLines || haveBytes < needBytes) {
      const wait = Math.max((needLines - haveLines) / lineRate, (needBytes - haveBytes) / byteRate);
      this.#buckets.set(tokenId, { lines: haveLines, bytes: haveBytes, at: nowMs });
      throw new TooManyRequests(
        `This agent token writes log lines faster than ${lineRate} lines or ${byteRate} bytes a second (LOG_TOKEN_LINES_PER_SECOND, LOG_TOKEN_BYTES_PER_SECOND); retry after the Retry-After seconds.`,
        Math.max(1, Math.ceil(wait)),
      );
    }
    this.#buckets.set(tokenId, { lines: haveLines - needLines, bytes: haveBytes - needBytes, at: nowMs });
    if (this.#buckets.size > 1000) this.#forgetIdle(nowMs);
  }

  #forgetIdle(nowMs: number): void {
    for (const [tokenId, bucket] of this.#buckets) if (nowMs - bucket.at > IDLE_FORGET_MS) this.#buckets.delete(tokenId);
  }
}
