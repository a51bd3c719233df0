/**
 * The memory a child process holds live, read through its inspector (started with
 * `--inspect=127.0.0.1:0`, see `INSPECT`): a full garbage collection first, then V8's used heap
 * plus the memory outside it that JavaScript objects own (Buffers, ArrayBuffers). Unlike RSS, this
 * does not depend on when V8 last grew its heap or whether the allocator kept pages from earlier
 * work: RSS deltas of one process holding the same 1,000 requests ranged from 1.5 to 26 MB over
 * three rounds of the long-poll scenario, so a ratio of two RSS deltas was
 * decided by the order of events more than by what each server keeps per request.
 */

/** The environment that starts a child with its inspector on a free loopback port. */
export const INSPECT = { NODE_OPTIONS: '--inspect=127.0.0.1:0' } as const;

export type LiveHeap = { heapBytes: number; externalBytes: number; totalBytes: number };

/** The inspector's WebSocket address, from the "Debugger listening on ws://…" line Node prints on stderr. */
export function inspectorUrl(output: string): string {
  const match = /Debugger listening on (ws:\/\/\S+)/.exec(output);
  if (!match) throw new Error(`no inspector address in the child's output:\n${output.slice(0, 500)}`);
  return match[1]!;
}

/** Collects garbage in the child, then answers what stays live. */
export async function liveHeap(url: string): Promise<LiveHeap> {
  const socket = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener('open', () => resolve(), { once: true });
    socket.addEventListener('error', () => reject(new Error(`could not reach the inspector at ${url}`)), { once: true });
  });
  let nextId = 0;
  const pending = new Map<number, { resolve: (result: unknown) => void; reject: (error: Error) => void }>();
  socket.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } };
    if (message.id === undefined) return;
    const waiter = pending.get(message.id);
    pending.delete(message.id);
    if (message.error) waiter?.reject(new Error(message.error.message));
    else waiter?.resolve(message.result);
  });
  const call = (method: string, params: Record<string, unknown> = {}) =>
    new Promise<unknown>((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  try {
    // Twice: objects freed by the first collection's finalizers go in the second.
    await call('HeapProfiler.collectGarbage');
    await call('HeapProfiler.collectGarbage');
    const usage = (await call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true })) as {
      result: { value: string };
    };
    const memory = JSON.parse(usage.result.value) as NodeJS.MemoryUsage;
    return { heapBytes: memory.heapUsed, externalBytes: memory.external, totalBytes: memory.heapUsed + memory.external };
  } finally {
    socket.close();
  }
}
