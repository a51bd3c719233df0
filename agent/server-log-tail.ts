import { closeSync, fstatSync, ftruncateSync, openSync, readSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { splitLines } from './processes.ts';

/** Bytes read from the file per tick at most. */
const CHUNK = 1024 * 1024;
/** Past this many unread bytes the agent skips to the end (a flood it cannot ship anyway). */
const MAX_BEHIND = 64 * 1024 * 1024;
/** Once everything is read and the file is past this size, it is emptied (the server appends, so it goes on at 0). */
const TRUNCATE_AT = 8 * 1024 * 1024;

/**
 * Follows the output file of an agent server. A server's output goes to a file, not a pipe to the
 * agent: the server outlives a restart of the agent, and a pipe would break with the agent (the
 * server's next write fails with EPIPE). The agent reads what was appended every `intervalMs`,
 * in chunks, as lines; the file is emptied once read, so it never grows past a bound for long.
 */
export class ServerLogTail {
  readonly #fd: number;
  readonly #stream = new PassThrough();
  readonly #timer: NodeJS.Timeout;
  #offset: number;
  #skipped = 0;

  /** `fromEnd`: an adopted server's earlier output was shipped by the agent before. */
  constructor(file: string, onLine: (line: string) => void, options: { fromEnd?: boolean; intervalMs?: number } = {}) {
    this.#fd = openSync(file, 'r+');
    this.#offset = options.fromEnd ? fstatSync(this.#fd).size : 0;
    splitLines(this.#stream, onLine);
    this.#timer = setInterval(() => this.read(), options.intervalMs ?? 200);
  }

  /** Reads what was appended since the last read (also called once more when the server exited). */
  read(): void {
    let size: number;
    try {
      size = fstatSync(this.#fd).size;
    } catch {
      return;
    }
    // Emptied by someone else, or the server's own truncation: start over at its end.
    if (size < this.#offset) this.#offset = 0;
    if (size - this.#offset > MAX_BEHIND) {
      this.#skipped += size - this.#offset;
      this.#offset = size;
      this.#stream.write(`\n[agent: ${this.#skipped} bytes of the server's output skipped: it printed faster than it can be shipped]\n`);
      this.#skipped = 0;
    }
    const buffer = Buffer.allocUnsafe(CHUNK);
    let rounds = 4;
    while (this.#offset < size && rounds-- > 0) {
      const read = readSync(this.#fd, buffer, 0, Math.min(CHUNK, size - this.#offset), this.#offset);
      if (read <= 0) break;
      this.#offset += read;
      this.#stream.write(Buffer.from(buffer.subarray(0, read)));
    }
    if (this.#offset === size && size > TRUNCATE_AT) {
      ftruncateSync(this.#fd, 0);
      this.#offset = 0;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
    this.read();
    this.#stream.end();
    try {
      closeSync(this.#fd);
    } catch {
      // closed already
    }
  }
}
