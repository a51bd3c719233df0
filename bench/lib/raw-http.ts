import { connect, type Socket } from 'node:net';

/**
 * A minimal HTTP/1.1 keep-alive client for the paced generator: each request is written as
 * prepared bytes on a plain socket and each answer is found by its header block and its
 * Content-Length (or chunked framing). node:http's client costs tens of microseconds per request
 * (an IncomingMessage, header objects, stream events); at the paced rates of the hot paths (10,000+
 * requests a second on a two-core machine) that made the generator, not the server, the slowest
 * part, and its own queueing showed up as the server's p99. This does one buffer search per answer.
 *
 * One request at a time per connection (no pipelining), like every client of the API.
 */
export type RawRequest = { method: string; path: string; headers: Record<string, string>; body?: string };

/** `body`: the answer's body bytes (chunked framing removed); a view into the read buffer, copy it to keep it. */
type Waiting = { bytes: Buffer; onDone: (status: number, body: Buffer) => void };

const HEADER_END = Buffer.from('\r\n\r\n');

export class RawConnection {
  readonly #socket: Socket;
  #buffer: Buffer = Buffer.alloc(0);
  #current: Waiting | null = null;
  /** Set when the answer's header block is parsed: the status, and where the whole answer ends (or chunked). */
  #status = 0;
  #bodyStart = 0;
  #answerEnd = -1;
  #chunked = false;
  #failed: Error | null = null;
  /** Resolves once the socket is connected (rejects if it never is). */
  readonly connected: Promise<void>;

  constructor(host: string, port: number) {
    this.#socket = connect({ host, port, noDelay: true });
    this.connected = new Promise((resolve, reject) => {
      this.#socket.once('connect', resolve);
      this.#socket.once('error', reject);
    });
    this.connected.catch(() => undefined);
    this.#socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    this.#socket.on('error', (error) => this.#fail(error));
    this.#socket.on('close', () => this.#fail(new Error('connection closed')));
  }

  get busy(): boolean {
    return this.#current !== null;
  }

  /** Sends one request; `onDone` gets the answer's status (0 when the connection failed) and body. */
  send(bytes: Buffer, onDone: (status: number, body: Buffer) => void): void {
    if (this.#current) throw new Error('one request at a time per connection');
    if (this.#failed) return onDone(0, EMPTY);
    this.#current = { bytes, onDone };
    this.#socket.write(bytes);
  }

  close(): void {
    this.#socket.destroy();
  }

  #fail(error: Error): void {
    if (this.#failed) return;
    this.#failed = error;
    const current = this.#current;
    this.#current = null;
    current?.onDone(0, EMPTY);
  }

  #onData(chunk: Buffer): void {
    this.#buffer = this.#buffer.length ? Buffer.concat([this.#buffer, chunk]) : chunk;
    for (;;) {
      if (this.#answerEnd < 0 && !this.#chunked) {
        const headerEnd = this.#buffer.indexOf(HEADER_END);
        if (headerEnd < 0) return;
        const head = this.#buffer.toString('latin1', 0, headerEnd);
        this.#status = Number(head.slice(9, 12));
        const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
        const bodyStart = headerEnd + 4;
        this.#bodyStart = bodyStart;
        if (length) this.#answerEnd = bodyStart + Number(length[1]);
        else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
          this.#chunked = true;
          this.#buffer = this.#buffer.subarray(bodyStart);
          this.#bodyStart = 0;
        } else this.#answerEnd = bodyStart; // 204, 304: no body
      }
      let body: Buffer | null = null;
      if (this.#chunked) {
        const end = chunkedEnd(this.#buffer);
        if (end < 0) return;
        body = unchunked(this.#buffer.subarray(0, end));
        this.#answerEnd = end;
        this.#chunked = false;
      }
      if (this.#buffer.length < this.#answerEnd) return;
      body ??= this.#buffer.subarray(this.#bodyStart, this.#answerEnd);
      this.#buffer = this.#buffer.subarray(this.#answerEnd);
      this.#answerEnd = -1;
      const current = this.#current;
      this.#current = null;
      current?.onDone(this.#status, body);
      if (!this.#buffer.length) return;
    }
  }
}

const EMPTY = Buffer.alloc(0);

/** The data of a whole chunked body (its framing removed). */
function unchunked(framed: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = framed.indexOf('\r\n', at);
    const size = parseInt(framed.toString('latin1', at, lineEnd), 16);
    if (size === 0) return Buffer.concat(parts);
    parts.push(framed.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** Where a chunked body ends (after its last, empty chunk and the blank line), or -1 if not yet. */
function chunkedEnd(buffer: Buffer): number {
  let at = 0;
  for (;;) {
    const lineEnd = buffer.indexOf('\r\n', at);
    if (lineEnd < 0) return -1;
    const size = parseInt(buffer.toString('latin1', at, lineEnd), 16);
    if (Number.isNaN(size)) throw new Error('bad chunk size');
    if (size === 0) {
      const end = buffer.indexOf('\r\n\r\n', lineEnd) + 4;
      return end >= 4 && end <= buffer.length ? end : -1;
    }
    at = lineEnd + 2 + size + 2;
    if (at > buffer.length) return -1;
  }
}

/** The bytes of one request. */
export function requestBytes(host: string, request: RawRequest): Buffer {
  const lines = [`${request.method} ${request.path} HTTP/1.1`, `host: ${host}`, 'connection: keep-alive'];
  for (const [name, value] of Object.entries(request.headers)) lines.push(`${name}: ${value}`);
  if (request.body !== undefined) lines.push(`content-length: ${Buffer.byteLength(request.body)}`);
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${request.body ?? ''}`);
}
