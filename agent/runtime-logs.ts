import type { AgentClient } from './client.ts';
import { MAX_LINE, truncateLine } from './log-stream.ts';
import type { ServerLine } from './server-output.ts';

export type RuntimeLogOptions = {
  /** Lines per second sent at most (a token bucket with this burst). */
  perSecond: number;
  burst: number;
  /** Characters waiting to be sent at most: past it lines are counted and dropped, so a flood costs the agent no memory. */
  maxQueuedChars: number;
  flushMs: number;
};

export const DEFAULT_RUNTIME_LOG_OPTIONS: RuntimeLogOptions = { perSecond: 50, burst: 500, maxQueuedChars: 1024 * 1024, flushMs: 1000 };

/**
 * Ships what a live revision's agent server prints after `DEPLOYED` to the revision's deploy log
 * (`langgraph deploy logs` shows it), once a second, at most `perSecond` lines on average and
 * `maxQueuedChars` waiting; the lines past either are counted and the control plane stores one
 * line saying how many were dropped. A failed send is dropped too, never retried into a backlog.
 */
export class RuntimeLogShipper {
  readonly #client: AgentClient;
  readonly #revisionId: string;
  readonly #options: RuntimeLogOptions;
  readonly #report: (message: string) => void;
  #queue: Array<ServerLine & { timestamp: string }> = [];
  #queuedChars = 0;
  #dropped = 0;
  #tokens: number;
  #refilledAt = Date.now();
  #timer: NodeJS.Timeout | null = null;
  #sending: Promise<void> = Promise.resolve();
  #stopped = false;

  constructor(client: AgentClient, revisionId: string, report: (message: string) => void, options: Partial<RuntimeLogOptions> = {}) {
    this.#client = client;
    this.#revisionId = revisionId;
    this.#report = report;
    this.#options = { ...DEFAULT_RUNTIME_LOG_OPTIONS, ...options };
    this.#tokens = this.#options.burst;
  }

  line(line: ServerLine): void {
    if (this.#stopped) return;
    const now = Date.now();
    this.#tokens = Math.min(this.#options.burst, this.#tokens + ((now - this.#refilledAt) / 1000) * this.#options.perSecond);
    this.#refilledAt = now;
    const message = truncateLine(line.message, MAX_LINE);
    if (this.#tokens < 1 || this.#queuedChars + message.length > this.#options.maxQueuedChars) {
      this.#dropped += 1;
    } else {
      this.#tokens -= 1;
      // The line's own time, not the batch's: `langgraph deploy logs -f` follows a log by time.
      this.#queue.push({ level: line.level, message, timestamp: new Date(now).toISOString() });
      this.#queuedChars += message.length;
    }
    if (!this.#timer) this.#timer = setTimeout(() => void this.flush(), this.#options.flushMs);
  }

  /** Characters waiting now (for tests and diagnostics). */
  queuedChars(): number {
    return this.#queuedChars;
  }

  flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const lines = this.#queue.splice(0, 1000);
    const dropped = this.#dropped;
    this.#queuedChars -= lines.reduce((sum, line) => sum + line.message.length, 0);
    this.#dropped = 0;
    if (this.#queue.length > 0 && !this.#stopped) this.#timer = setTimeout(() => void this.flush(), this.#options.flushMs);
    if (lines.length === 0 && dropped === 0) return this.#sending;
    const batch = lines.length > 0 ? lines : [{ level: 'warn' as const, message: 'runtime log lines were dropped by the agent' }];
    this.#sending = this.#sending.then(() =>
      this.#client.runtimeLogs(this.#revisionId, batch, dropped).then(
        () => undefined,
        (error: unknown) =>
          this.#report(
            `agent: could not send ${lines.length} runtime log line(s) of revision ${this.#revisionId}; they are lost: ${error instanceof Error ? error.message : String(error)}`,
          ),
      ),
    );
    return this.#sending;
  }

  /** Sends what waits and stops taking lines (the server stopped, or the agent is stopping). */
  async stop(): Promise<void> {
    await this.flush();
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}
