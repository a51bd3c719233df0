import { closeSync, type FSWatcher, fstatSync, ftruncateSync, openSync, readSync, watch } from 'node:fs';
import { PassThrough } from 'node:stream';
import { splitLines } from './processes.ts';

/** Bytes read from the file per tick at most. */
const CHUNK = 1024 * 1024;
/** Past this many unread bytes the agent skips to the end (a flood it cannot ship anyway). */
const MAX_BEHIND = 64 * 1024 * 1024;
/** At most this much new output in a read, and the reads keep up: the next change is read at once. */
const QUIET_READ = 64 * 1024;
/** Once everything is read and the file is past this size, it is emptied (the server appends, so it goes on at 0). */
const TRUNCATE_AT = 8 * 1024 * 1024;

/**
 * Follows the output file of an agent server. A server's output goes to a file, not a pipe to the
 * agent: the server outlives a restart of the agent, and a pipe would break with the agent (the
 * server's next write fails with EPIPE). The agent reads what was appended as soon as the file
 * changes (inotify) while its reads keep up, and every `intervalMs` in any case, in chunks, as
 * lines, so each line is stamped when the server printed it, not up to a poll later; the file is
 * emptied once read, so it never grows past a bound for long.
 */
export class ServerLogTail {
  readonly #fd: number;
  readonly #stream = new PassThrough();
  readonly #timer: NodeJS.Timeout;
  readonly #watcher: FSWatcher | null;
  #soon: NodeJS.Immediate | null = null;
  /** Whether the last read reached the end of the file, and found little to read. */
  #caughtUp = true;
  #offset: number;
  #skipped = 0;

  /** `fromEnd`: an adopted server's earlier output was shipped by the agent before. */
  constructor(file: string, onLine: (line: string) => void, options: { fromEnd?: boolean; intervalMs?: number } = {}) {
    this.#fd = openSync(file, 'r+');
    this.#offset = options.fromEnd ? fstatSync(this.#fd).size : 0;
    splitLines(this.#stream, onLine);
    this.#timer = setInterval(() => this.read(), options.intervalMs ?? 200);
    // A change read at once only while the reads keep up (a server's start, a request's lines):
    // a flood is left to the poll, as before, so the agent never takes in output faster than that.
    // Many change events come in one turn of the loop: one read takes them all.
    this.#watcher = watchFile(file, () => {
      if (!this.#caughtUp) return;
      this.#soon ??= setImmediate(() => {
        this.#soon = null;
        this.read();
      });
    });
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
    const from = this.#offset;
    const buffer = Buffer.allocUnsafe(CHUNK);
    let rounds = 4;
    while (this.#offset < size && rounds-- > 0) {
      const read = readSync(this.#fd, buffer, 0, Math.min(CHUNK, size - this.#offset), this.#offset);
      if (read <= 0) break;
      this.#offset += read;
      this.#stream.write(Buffer.from(buffer.subarray(0, read)));
    }
    this.#caughtUp = this.#offset === size && this.#offset - from <= QUIET_READ;
    if (this.#offset === size && size > TRUNCATE_AT) {
      ftruncateSync(this.#fd, 0);
      this.#offset = 0;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#watcher?.close();
    if (this.#soon) clearImmediate(this.#soon);
    this.read();
    this.#stream.end();
    try {
      closeSync(this.#fd);
    } catch {
      // closed already
    }
  }
}

/** Calls `onChange` when `file` changes; null where the file system has no change events (the poll still reads it). */
function watchFile(file: string, onChange: () => void): FSWatcher | null {
  try {
    const watcher = watch(file, { persistent: false }, onChange);
    watcher.on('error', () => watcher.close());
    return watcher;
  } catch {
    return null;
  }
}
