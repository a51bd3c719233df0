/**
 * Where a waiting request learns that its client went away: registers `cancel` and answers a
 * function that unregisters it. An `AbortSignal` does (see `signalGone`); so does Node's response
 * 'close' event, without the whole WHATWG Request an `AbortSignal` would make the HTTP layer build.
 */
export type Gone = (cancel: () => void) => () => void;

/** A `Gone` from an `AbortSignal`. */
export function signalGone(signal: AbortSignal): Gone {
  return (cancel) => {
    signal.addEventListener('abort', cancel, { once: true });
    return () => signal.removeEventListener('abort', cancel);
  };
}

/** Called once when a wait ends: whether the record changed, and what the change was announced with. */
export type Settled = (changed: boolean, value: unknown) => void;

/** A waiter's states, in order (`Waiter.#state`). */
const WAITING = 0;
const SETTLED = 1;
const RELEASED = 2;

/**
 * One held request: a single object, which is also its own entry in the list of waiters with the
 * same timeout (`Deadlines`), so a waiter has no timer, timer callback or extra closure of its own:
 * a thousand held requests is the case this is measured on (test/e2e/long-poll-memory.test.ts).
 * What happens when the wait ends is the subclass's (`settled`); a caller that holds many may make
 * its request's own state a subclass (`RevisionWatch.hold`), so a held request is this one object.
 */
export abstract class Waiter {
  /** What the change was announced with (the changed record), so waiters need not read it again. */
  #announced: unknown;
  /** WAITING, then SETTLED (answered, the bookkeeping to do: `notify`'s first pass), then RELEASED. */
  #state = WAITING;

  readonly revisionId: string;
  /** The watch's bookkeeping when the wait ends (set by the watch when it takes the waiter). */
  onDone: ((waiter: Waiter) => void) | undefined;
  /** This waiter's place in its `Deadlines` list (maintained by the list). */
  deadline = 0;
  list: Deadlines | undefined;
  previous: Waiter | undefined;
  next: Waiter | undefined;

  constructor(revisionId: string) {
    this.revisionId = revisionId;
  }

  /** Called once, when the wait ends: whether the record changed, and what the change was announced with. */
  protected abstract settled(changed: boolean, value: unknown): void;

  /** Starts listening for the client going away (then `cancel`); none by default. */
  protected watchGone(): void {}

  /** Stops what `watchGone` started (called once, when the wait ends). */
  protected unwatchGone(): void {}

  start(deadlines: Deadlines): void {
    deadlines.add(this);
    this.watchGone();
  }

  /**
   * Whether the waiter is being answered in `notify`'s first pass: settled, its bookkeeping
   * (`release`) still to come. What it leaves for then waits for `afterRelease`.
   */
  get settling(): boolean {
    return this.#state === SETTLED;
  }

  finish(changed: boolean, value?: unknown): void {
    if (this.#state !== WAITING) return;
    if (changed) this.#announced = value;
    this.release();
    this.settled(changed, this.#announced);
  }

  /**
   * `notify`'s first pass: settles the waiter as changed, with `value`, and leaves the bookkeeping
   * (`release`) for after: every waiter of a change is answered before any is taken off its lists,
   * so the last answer does not wait for the bookkeeping of all the others.
   */
  wake(value: unknown): void {
    if (this.#state !== WAITING) return;
    this.#state = SETTLED;
    this.#announced = value;
    this.settled(true, value);
  }

  /** Takes the waiter off its lists and stops listening for its client; then `afterRelease`. Once. */
  release(): void {
    if (this.#state === RELEASED) return;
    this.#state = RELEASED;
    this.list?.remove(this);
    this.unwatchGone();
    this.onDone?.(this);
    this.afterRelease();
  }

  /** Called once the waiter is released: what the subclass left for after the answers (its count). */
  protected afterRelease(): void {}

  /** Ends the wait unchanged (the client went away, or the caller no longer waits). A property, so `gone` can take it as it is. */
  readonly cancel = (): void => this.finish(false);

  /** Ends the wait as changed, with `value` (the caller learnt of the change itself). */
  announce(value: unknown): void {
    this.finish(true, value);
  }

  value(): unknown {
    return this.#announced;
  }
}

/** A waiter that settles a callback or, made without one, a promise; told of its client going away by a `Gone`. */
class FunctionWaiter extends Waiter {
  #settle: Settled | undefined;
  #promise: Promise<boolean> | undefined;
  readonly #gone: Gone | undefined;
  #unregister: (() => void) | undefined;

  constructor(revisionId: string, gone: Gone | undefined, settle: Settled | undefined) {
    super(revisionId);
    this.#gone = gone;
    if (settle) this.#settle = settle;
    else this.#promise = new Promise<boolean>((resolve) => (this.#settle = resolve));
  }

  /** Resolves `true` when the revision changed, `false` when the wait ended otherwise (promise waiters only). */
  get changed(): Promise<boolean> {
    if (!this.#promise) throw new Error('a waiter made with a callback has no promise');
    return this.#promise;
  }

  protected override watchGone(): void {
    if (this.#gone) this.#unregister = this.#gone(this.cancel);
  }

  protected override unwatchGone(): void {
    this.#unregister?.();
    this.#unregister = undefined;
  }

  protected override settled(changed: boolean, value: unknown): void {
    const settle = this.#settle!;
    this.#settle = undefined;
    settle(changed, value);
  }
}

/**
 * The waiters of one timeout, in the order they started, which is the order their deadlines come
 * in: one timer for the whole list, armed for its first deadline (as Node keeps one list per
 * duration for its own timers, but without a `Timeout` object and callback per waiter).
 */
class Deadlines {
  readonly #timeoutMs: number;
  readonly #emptied: (timeoutMs: number) => void;
  #first: Waiter | undefined;
  #last: Waiter | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** The deadline the timer is armed for: every waiter due by then is expired when it fires (whatever the wall clock did meanwhile). */
  #armedFor = 0;

  constructor(timeoutMs: number, emptied: (timeoutMs: number) => void) {
    this.#timeoutMs = timeoutMs;
    this.#emptied = emptied;
  }

  add(waiter: Waiter): void {
    waiter.deadline = Date.now() + this.#timeoutMs;
    waiter.list = this;
    waiter.previous = this.#last;
    if (this.#last) this.#last.next = waiter;
    else this.#first = waiter;
    this.#last = waiter;
    if (!this.#timer) this.#arm(waiter.deadline);
  }

  remove(waiter: Waiter): void {
    if (waiter.previous) waiter.previous.next = waiter.next;
    else this.#first = waiter.next;
    if (waiter.next) waiter.next.previous = waiter.previous;
    else this.#last = waiter.previous;
    waiter.list = waiter.previous = waiter.next = undefined;
    if (!this.#first) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#emptied(this.#timeoutMs);
    }
  }

  #arm(deadline: number): void {
    this.#armedFor = deadline;
    this.#timer = setTimeout(this.#expire, Math.max(0, deadline - Date.now()));
  }

  readonly #expire = (): void => {
    this.#timer = undefined;
    const due = Math.max(this.#armedFor, Date.now());
    while (this.#first && this.#first.deadline <= due) this.#first.finish(false);
    if (this.#first) this.#arm(this.#first.deadline);
  };
}

/**
 * In-process notification of revision changes, for the conditional long-poll. Every status change
 * goes through the pipeline, which calls `notify`; a waiter costs one small object (and its promise).
 */
export class RevisionWatch {
  readonly #waiters = new Map<string, Set<Waiter>>();
  /** The waiters by their timeout in milliseconds (clients mostly ask for the same few). */
  readonly #deadlines = new Map<number, Deadlines>();

  /**
   * `changed` resolves `true` when the revision changes, `false` when `timeoutMs` passes or the
   * client is gone. `value()` is what the change was announced with, if anything (the changed
   * record), so a thousand waiters need not each read it again.
   */
  wait(revisionId: string, timeoutMs: number, gone?: Gone | AbortSignal): { changed: Promise<boolean>; cancel: () => void; value: () => unknown } {
    return this.hold(new FunctionWaiter(revisionId, gone instanceof AbortSignal ? signalGone(gone) : gone, undefined), timeoutMs);
  }

  /**
   * `wait` for a caller that takes a callback: `settled` is called once, as `changed` would resolve,
   * with what the change was announced with. No promise is made.
   */
  waitThen(revisionId: string, timeoutMs: number, gone: Gone | undefined, settled: Settled): { cancel: () => void; announce: (value: unknown) => void } {
    return this.hold(new FunctionWaiter(revisionId, gone, settled), timeoutMs);
  }

  /**
   * Holds a waiter of the caller's own making until its revision changes (`notify`), `timeoutMs`
   * passes, or it is ended (`cancel`, `announce`); it is settled once. The GET revision fast lane
   * holds its requests so: the request's state is the waiter, with no callback or closure beside it.
   */
  hold<W extends Waiter>(waiter: W, timeoutMs: number): W {
    let set = this.#waiters.get(waiter.revisionId);
    if (!set) this.#waiters.set(waiter.revisionId, (set = new Set()));
    waiter.onDone = this.#removed;
    set.add(waiter);
    let deadlines = this.#deadlines.get(timeoutMs);
    if (!deadlines) this.#deadlines.set(timeoutMs, (deadlines = new Deadlines(timeoutMs, this.#noDeadlines)));
    waiter.start(deadlines);
    return waiter;
  }

  /** The ids that have waiters in this process (what a resync of a shared watch wakes). */
  waitedIds(): string[] {
    return [...this.#waiters.keys()];
  }

  readonly #noDeadlines = (timeoutMs: number): void => {
    this.#deadlines.delete(timeoutMs);
  };

  readonly #removed = (waiter: Waiter): void => {
    // After `notify` its set is no longer the map's (nor the one a later waiter of the id made): nothing to remove then.
    const set = this.#waiters.get(waiter.revisionId);
    if (!set?.delete(waiter)) return;
    if (set.size === 0) this.#waiters.delete(waiter.revisionId);
  };

  /**
   * Wakes every waiter of `revisionId`, handing them `value` (the changed record) when given. In two
   * passes: every waiter answered first (`wake`), then each taken off its lists (`release`), so the
   * bookkeeping of a thousand waiters (their deadline list, their client's 'close' listener, their
   * count) comes after the last answer rather than between the answers.
   */
  notify(revisionId: string, value?: unknown): void {
    const waiters = this.#waiters.get(revisionId);
    if (!waiters) return;
    // The set is no longer the map's: a waiter released below finds nothing to remove (`#removed`).
    this.#waiters.delete(revisionId);
    for (const waiter of waiters) waiter.wake(value);
    for (const waiter of waiters) waiter.release();
  }

  /** How many requests are waiting (for tests and benchmarks). */
  get size(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }
}
