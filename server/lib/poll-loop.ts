/**
 * A pass run again and again, `intervalMs` after the previous one ended (never two at once),
 * until stopped: the shape of every outbox sender. A failed pass is reported and the loop goes on.
 * Its timer never keeps the process alive.
 */
export class PollLoop {
  readonly #pass: () => Promise<void>;
  readonly #intervalMs: number;
  readonly #onError: (error: unknown) => void;
  #timer: NodeJS.Timeout | null = null;
  #stopped = true;

  constructor(options: { pass: () => Promise<void>; intervalMs: number; onError: (error: unknown) => void }) {
    this.#pass = options.pass;
    this.#intervalMs = options.intervalMs;
    this.#onError = options.onError;
  }

  /** Whether `stop` was called (or `start` never was): a pass in progress checks it to end early. */
  get stopped(): boolean {
    return this.#stopped;
  }

  start(): void {
    this.#stopped = false;
    this.#schedule(0);
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#pass()
        .catch(this.#onError)
        .finally(() => this.#schedule(this.#intervalMs));
    }, delayMs);
    this.#timer.unref();
  }
}
