import type { BudgetLease } from '../lib/byte-budget.ts';
import { PayloadTooLarge, Unavailable } from './errors.ts';

/** What a client that found the in-flight budget spent is asked to wait, in seconds. */
export const BUDGET_RETRY_AFTER_SECONDS = 2;

export type ReadLimitedOptions = {
  /**
   * An oversized body is read on and thrown away up to this many bytes before refusing it: a client
   * still writing when the socket closes sees a broken pipe instead of the 413 that says why.
   */
  drainUpTo?: number;
  /**
   * Bytes kept are taken from this lease first (the declared length at once, when there is one);
   * when it cannot spare them, reading stops with `Unavailable` (503, Retry-After). The caller
   * releases the lease when the request ends.
   */
  budget?: BudgetLease;
};

/**
 * Reads at most `limit` bytes of a request or response body, refusing more even when no length
 * was declared. The `PayloadTooLarge` error's `drained` says whether the body was read to its end.
 */
export async function readLimited(
  message: { body: ReadableStream<Uint8Array> | null; headers?: Headers },
  limit: number,
  options: ReadLimitedOptions = {},
): Promise<Uint8Array> {
  if (!message.body) return new Uint8Array();
  const { budget } = options;
  const reader = message.body.getReader();
  const drainUpTo = Math.max(limit, options.drainUpTo ?? limit);
  const chunks: Uint8Array[] = [];
  let size = 0;
  let reserved = 0;
  const reserve = async (upTo: number) => {
    if (!budget || upTo <= reserved) return;
    if (!budget.take(upTo - reserved)) {
      await reader.cancel().catch(() => undefined);
      throw new Unavailable('Too many request bodies are being received at once; retry shortly.', {
        retryAfterSeconds: BUDGET_RETRY_AFTER_SECONDS,
        closeConnection: true,
      });
    }
    reserved = upTo;
  };
  // A declared length is taken whole before reading: a client the budget cannot serve is told at once.
  const declared = Number(message.headers?.get('content-length') ?? NaN);
  if (Number.isSafeInteger(declared) && declared > 0) await reserve(Math.min(declared, limit));
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > drainUpTo) {
      await reader.cancel().catch(() => undefined);
      throw new PayloadTooLarge(`The body is larger than the limit of ${limit} bytes.`, { drained: false });
    }
    if (size <= limit) {
      await reserve(size);
      chunks.push(value);
    }
  }
  if (size > limit) throw new PayloadTooLarge(`The body is larger than the limit of ${limit} bytes.`, { drained: true });
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
