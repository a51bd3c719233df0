import { PayloadTooLarge } from '../domain/errors.ts';

/** Reads at most `limit` bytes of a request or response body, refusing more even when no length was declared. */
export async function readLimited(message: { body: ReadableStream<Uint8Array> | null }, limit: number): Promise<Uint8Array> {
  if (!message.body) return new Uint8Array();
  const reader = message.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw new PayloadTooLarge(`The body is larger than the limit of ${limit} bytes.`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
