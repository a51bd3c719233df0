import { PayloadTooLarge } from '../domain/errors.ts';

/**
 * Reads at most `limit` bytes of a request or response body, refusing more even when no length
 * was declared. With `drainUpTo`, an oversized body is read on and thrown away up to that many
 * bytes before refusing it: a client still writing when the socket closes sees a broken pipe
 * instead of the 413 that says why. The error's `drained` says whether the body was read to its end.
 */
export async function readLimited(message: { body: ReadableStream<Uint8Array> | null }, limit: number, options: { drainUpTo?: number } = {}): Promise<Uint8Array> {
  if (!message.body) return new Uint8Array();
  const reader = message.body.getReader();
  const drainUpTo = Math.max(limit, options.drainUpTo ?? limit);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > drainUpTo) {
      await reader.cancel().catch(() => undefined);
      throw new PayloadTooLarge(`The body is larger than the limit of ${limit} bytes.`, { drained: false });
    }
    if (size <= limit) chunks.push(value);
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
