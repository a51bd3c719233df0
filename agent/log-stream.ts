import type { AgentClient } from './client.ts';
import { SlowDown, WorkGone } from './client.ts';
import { plainText } from './server-output.ts';

type Line = { type: 'build' | 'deploy'; level: 'info' | 'warn' | 'error'; message: string; timestamp?: string };

/** Characters kept of one line (the route takes up to 16000); the rest is cut with a marker saying so. */
export const MAX_LINE = 8000;
/** Lines per request at most (the route takes up to 1000). */
const BATCH = 500;
/**
 * Bytes of one request's JSON body at most: well under the API's 1 MiB body limit, so a batch of
 * long lines (minified bundles, webpack stats) is split instead of refused with 413 as a whole.
 */
export const MAX_BATCH_BYTES = 768 * 1024;
/**
 * Lines one claim sends at most (a build printing hundreds of megabytes would otherwise grow the
 * database by as much); past it lines are counted and one line says how many were dropped. The
 * agent's own `error` lines (why a revision failed) always pass.
 */
export const MAX_LINES_PER_CLAIM = 20_000;
/** `{"lines":[` … `]}` around the lines. */
const ENVELOPE_BYTES = 16;
/** Times a batch the control plane asked to slow down (429) is sent again, after the wait it names. */
const SLOW_DOWN_RETRIES = 30;

/** Cuts an over-long line, saying how much was cut; never splits a surrogate pair. */
export function truncateLine(message: string, max = MAX_LINE): string {
  if (message.length <= max) return message;
  let end = max;
  const last = message.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${message.slice(0, end)}… [line truncated by the agent: ${message.length - end} more characters]`;
}

/** Splits lines into request bodies of at most `BATCH` lines and `maxBytes` bytes of JSON. */
export function batchesOf(lines: Line[], maxBytes = MAX_BATCH_BYTES): Line[][] {
  const batches: Line[][] = [];
  let batch: Line[] = [];
  let bytes = ENVELOPE_BYTES;
  for (const line of lines) {
    const size = Buffer.byteLength(JSON.stringify(line)) + 1;
    if (batch.length > 0 && (batch.length >= BATCH || bytes + size > maxBytes)) {
      batches.push(batch);
      batch = [];
      bytes = ENVELOPE_BYTES;
    }
    batch.push(line);
    bytes += size;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/**
 * Log lines of one claimed revision, sent in batches (every `flushMs`, or at once when many wait):
 * one request per batch instead of one per line. A 409 on a flush means the work is gone
 * (`onGone`); a 429 is waited out and sent again; any other failed send loses its lines, and says so on the agent's stderr (`report`)
 * rather than letting a build log go silently short.
 */
export class LogStream {
  readonly #client: AgentClient;
  readonly #claimId: string;
  readonly #flushMs: number;
  readonly #report: (message: string) => void;
  #pending: Line[] = [];
  #pendingBytes = 0;
  #timer: NodeJS.Timeout | null = null;
  #chain: Promise<void> = Promise.resolve();
  #onGone: (error: unknown) => void;
  #accepted = 0;
  #dropped = 0;
  readonly #maxLines: number;
  readonly #clock: () => number;

  constructor(
    client: AgentClient,
    claimId: string,
    onGone: (error: unknown) => void,
    flushMs = 200,
    report: (message: string) => void = (message) => void process.stderr.write(`${message}\n`),
    maxLines = MAX_LINES_PER_CLAIM,
    /** What stamps each line (ms since the epoch): the wall clock; a test moves its own. */
    clock: () => number = Date.now,
  ) {
    this.#clock = clock;
    this.#maxLines = maxLines;
    this.#client = client;
    this.#claimId = claimId;
    this.#onGone = onGone;
    this.#flushMs = flushMs;
    this.#report = report;
  }

  /** `at`: when the agent saw the line, if earlier than now (ms since the epoch). */
  line(type: Line['type'], message: string, level: Line['level'] = 'info', at?: number): void {
    if (this.#accepted >= this.#maxLines && level !== 'error') {
      this.#dropped += 1;
      return;
    }
    this.#accepted += 1;
    // Stored plain: colour and cursor codes would show as garbage in every reader of the log.
    // Stamped now, when the agent sees it: a batch is sent up to `flushMs` later, and its lines'
    // times must say when each was printed (the stages of a build are read from them).
    const line = { type, level, message: truncateLine(plainText(message)), timestamp: new Date(at ?? this.#clock()).toISOString() };
    this.#pending.push(line);
    this.#pendingBytes += Buffer.byteLength(line.message);
    if (this.#pending.length >= BATCH || this.#pendingBytes >= MAX_BATCH_BYTES) void this.flush();
    else if (!this.#timer) this.#timer = setTimeout(() => void this.flush(), this.#flushMs);
  }

  /** Sends what waits; resolves when every line given so far was sent (or failed). */
  flush(): Promise<void> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#dropped > 0) {
      const type = this.#pending.at(-1)?.type ?? 'build';
      this.#pending.push({
        type,
        level: 'warn',
        timestamp: new Date(this.#clock()).toISOString(),
        message: `${this.#dropped} log line(s) dropped: more than the ${this.#maxLines} lines the agent sends for one revision`,
      });
      this.#dropped = 0;
    }
    const lines = this.#pending;
    this.#pending = [];
    this.#pendingBytes = 0;
    if (lines.length > 0) {
      this.#chain = this.#chain.then(async () => {
        for (const batch of batchesOf(lines)) {
          await this.#send(batch).catch((error: unknown) => {
            if (!(error instanceof WorkGone)) {
              this.#report(
                `agent: could not send ${batch.length} ${batch[0]!.type} log line(s) of claim ${this.#claimId}; they are lost: ${error instanceof Error ? error.message : String(error)}`,
              );
            }
            this.#onGone(error);
          });
        }
      });
    }
    return this.#chain;
  }

  /** One batch; a 429 (the token's log rate) waits the Retry-After it names and sends again, so a burst is paced, not lost. */
  async #send(batch: Line[]): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#client.logs(this.#claimId, batch);
        return;
      } catch (error) {
        if (!(error instanceof SlowDown) || attempt >= SLOW_DOWN_RETRIES) throw error;
        await new Promise((resolve) => setTimeout(resolve, error.retryAfterSeconds * 1000));
      }
    }
  }
}
