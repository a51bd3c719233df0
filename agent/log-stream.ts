import type { AgentClient } from './client.ts';

type Line = { type: 'build' | 'deploy'; level: 'info' | 'warn' | 'error'; message: string };

const MAX_LINE = 8000;
const BATCH = 500;

/**
 * Log lines of one claimed revision, sent in batches (every `flushMs`, or at once when many wait):
 * one request per batch instead of one per line. A 409 on a flush means the work is gone.
 */
export class LogStream {
  readonly #client: AgentClient;
  readonly #claimId: string;
  readonly #flushMs: number;
  #pending: Line[] = [];
  #timer: NodeJS.Timeout | null = null;
  #chain: Promise<void> = Promise.resolve();
  #onGone: (error: unknown) => void;

  constructor(client: AgentClient, claimId: string, onGone: (error: unknown) => void, flushMs = 200) {
    this.#client = client;
    this.#claimId = claimId;
    this.#onGone = onGone;
    this.#flushMs = flushMs;
  }

  line(type: Line['type'], message: string, level: Line['level'] = 'info'): void {
    this.#pending.push({ type, level, message: message.length > MAX_LINE ? `${message.slice(0, MAX_LINE)}…` : message });
    if (this.#pending.length >= BATCH) void this.flush();
    else if (!this.#timer) this.#timer = setTimeout(() => void this.flush(), this.#flushMs);
  }

  /** Sends what waits; resolves when every line given so far was sent (or failed). */
  flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const lines = this.#pending;
    this.#pending = [];
    if (lines.length > 0) {
      this.#chain = this.#chain.then(async () => {
        for (let i = 0; i < lines.length; i += BATCH) {
          await this.#client.logs(this.#claimId, lines.slice(i, i + BATCH)).catch((error: unknown) => this.#onGone(error));
        }
      });
    }
    return this.#chain;
  }
}
