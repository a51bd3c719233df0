import type pg from 'pg';
import type { PipelinedStatement } from './pipeline.ts';

/** What sends the reads: one alone as usual, several as one pipeline answering each up to the first failure. */
export type ReadSender = {
  one(statement: PipelinedStatement): Promise<pg.QueryResult>;
  /** Resolves with every answer, or rejects with a `BatchFailure` saying how far it got (or any other error: every read failed). */
  many(statements: readonly PipelinedStatement[]): Promise<pg.QueryResult[]>;
};

/**
 * How a `many` failed: the answers before the statement that failed and its index (the statements
 * after it did not run); `answeredByServer`: PostgreSQL refused that statement (the connection is
 * fine), or else the connection failed.
 */
export class BatchFailure extends Error {
  readonly error: unknown;
  readonly at: number;
  readonly answered: readonly pg.QueryResult[];
  readonly answeredByServer: boolean;

  constructor(error: unknown, at: number, answered: readonly pg.QueryResult[], answeredByServer: boolean) {
    super('read batch failed');
    this.error = error;
    this.at = at;
    this.answered = answered;
    this.answeredByServer = answeredByServer;
  }
}

type Waiting = { statement: PipelinedStatement; resolve: (result: pg.QueryResult) => void; reject: (error: unknown) => void };

/** No more reads in one pipeline than this: a long batch would hold its first answers until the last is read. */
const MOST_IN_ONE_BATCH = 64;

/**
 * Lone reads (a SELECT outside a transaction: a revision's read, a create's integration and
 * listener reads) grouped while the database is busy: at most `inFlight` sends at a time; the reads
 * asked for meanwhile wait and leave together, as ONE pipeline (one round trip) when the next send
 * ends. While the database keeps up nothing waits (a lone read goes at once, as before); under load,
 * a read shares its socket write, its backend's wake-up and its read of the answer with the reads
 * of the other requests of the moment, where each paid its own (with several server processes on
 * few cores those wake-ups were most of a GET's cost: docs/decisions/postgresql-three-processes.md).
 *
 * A read PostgreSQL refuses answers its own error only: the reads before it in the pipeline are
 * answered, the ones after it (which the server skipped) are sent again.
 */
export class ReadBatcher {
  readonly #send: ReadSender;
  #inFlight: number;
  #sending = 0;
  #waiting: Waiting[] = [];

  constructor(send: ReadSender, inFlight: number) {
    this.#send = send;
    this.#inFlight = Math.max(1, inFlight);
  }

  /** Sends at a time now; a lower limit takes effect as sends end, a higher one at once. */
  get inFlight(): number {
    return this.#inFlight;
  }

  set inFlight(limit: number) {
    this.#inFlight = Math.max(1, limit);
    while (this.#sending < this.#inFlight && this.#waiting.length > 0) this.#sendWaiting();
  }

  read(statement: PipelinedStatement): Promise<pg.QueryResult> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ statement, resolve, reject });
      if (this.#sending < this.#inFlight) this.#sendWaiting();
    });
  }

  #sendWaiting(): void {
    const batch = this.#waiting.splice(0, MOST_IN_ONE_BATCH);
    this.#sending += 1;
    const sent = batch.length === 1 ? this.#sendOne(batch[0]!) : this.#sendMany(batch);
    void sent.finally(() => {
      this.#sending -= 1;
      // Below the limit, which may have been lowered meanwhile.
      if (this.#waiting.length > 0 && this.#sending < this.#inFlight) this.#sendWaiting();
    });
  }

  async #sendOne(read: Waiting): Promise<void> {
    try {
      read.resolve(await this.#send.one(read.statement));
    } catch (error) {
      read.reject(error);
    }
  }

  async #sendMany(batch: Waiting[]): Promise<void> {
    try {
      const results = await this.#send.many(batch.map((read) => read.statement));
      batch.forEach((read, i) => read.resolve(results[i]!));
    } catch (failure) {
      if (!(failure instanceof BatchFailure)) {
        for (const read of batch) read.reject(failure);
        return;
      }
      failure.answered.forEach((result, i) => batch[i]!.resolve(result));
      const skipped = batch.slice(failure.at + 1);
      if (failure.answeredByServer) {
        batch[failure.at]?.reject(failure.error);
        // Skipped, not refused: first in line for the next send.
        this.#waiting.unshift(...skipped);
      } else {
        for (const read of batch.slice(failure.at)) read.reject(failure.error);
      }
    }
  }
}
