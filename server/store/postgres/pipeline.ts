import pg from 'pg';

/** What pg builds a statement's answer with, as its own `Query` does (present at run time; its typings leave the builder out). */
type ResultBuilder = pg.QueryResult & {
  addFields(fields: unknown[]): void;
  addRow(row: unknown): void;
  parseRow(fields: unknown[]): unknown;
  addCommandComplete(message: unknown): void;
};
const runtime = pg as unknown as {
  Result: new (rowMode: undefined, types: pg.CustomTypesConfig) => ResultBuilder;
  utils: { prepareValue(value: unknown): unknown };
};

/**
 * One statement of a pipeline: text with `$n` placeholders and its values; `name`: a prepared
 * statement's, parsed once per connection and bound by name afterwards (one name, one text).
 */
export type PipelinedStatement = { text: string; values: unknown[]; name?: string };

/** The parts of pg's connection a submittable writes to (pg's own `Query` uses the same). */
type Connection = {
  stream: { cork?: () => void; uncork?: () => void };
  /** The names of the statements prepared on this connection, and their text (pg's own `Query` keeps it so too). */
  parsedStatements: Record<string, string>;
  parse(message: { text: string; name?: string }): void;
  close(message: { type: 'S'; name: string }): void;
  bind(message: { statement?: string; values: unknown[]; valueMapper: (value: unknown) => unknown }): void;
  describe(message: { type: 'P'; name: string }): void;
  execute(message: { portal: string; rows: number }): void;
  sync(): void;
};

type Message = { fields: unknown[] };

/**
 * Several statements sent to PostgreSQL at once and answered at once: one round trip, one
 * transaction. Each statement is Parse, Bind, Describe, Execute (the extended protocol, values bound
 * as parameters, as pg's `Query` does) and ONE Sync closes them all. Until that Sync the server
 * runs them in one implicit transaction: it commits at the Sync when all succeeded; at the first
 * error it skips the rest, rolls back, and answers that error. So a create's five statements and
 * its audit entry cost one wait for the server, where BEGIN, each statement and COMMIT cost one
 * each (eight): every wait is a socket write that wakes a backend and a read that wakes us.
 *
 * A named statement (`PipelinedStatement.name`) is parsed the first time a connection sends it and
 * bound by name after that: PostgreSQL parses, analyses and (after five runs, when its generic plan
 * costs no more) plans it once per connection instead of once per run. On a create's statements and
 * a revision's read, planning alone was a fifth of PostgreSQL's CPU
 * (docs/decisions/postgresql-three-processes.md, session 48).
 *
 * A "submittable" (pg's documented extension point, used by pg-cursor and pg-query-stream): the
 * client hands it its connection when its turn comes and routes the server's answers to it.
 */
export class StatementPipeline {
  readonly #statements: readonly PipelinedStatement[];
  readonly #types: pg.CustomTypesConfig;
  readonly #results: ResultBuilder[] = [];
  #current = 0;
  #failure: unknown;
  /** The statement the server refused, or that was running when the connection failed; undefined while none did. */
  #failedAt: number | undefined;
  /** The connection it was sent on, and the names it prepared there, by statement index. */
  #connection: Connection | undefined;
  readonly #prepared = new Map<number, string>();
  #resolve!: (results: pg.QueryResult[]) => void;
  #reject!: (error: unknown) => void;
  readonly done: Promise<pg.QueryResult[]>;

  constructor(statements: readonly PipelinedStatement[], types: pg.CustomTypesConfig) {
    this.#statements = statements;
    this.#types = types;
    this.done = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  submit(connection: Connection): void {
    // Corked: the messages of every statement leave in one write.
    connection.stream.cork?.();
    this.#connection = connection;
    try {
      for (const [i, statement] of this.#statements.entries()) {
        this.#results.push(new runtime.Result(undefined, this.#types));
        const { name } = statement;
        if (name === undefined) connection.parse({ text: statement.text });
        else if (connection.parsedStatements[name] === undefined) {
          // Closed first: a pipeline that failed may have left it prepared or not (closing none is no error).
          connection.close({ type: 'S', name });
          connection.parse({ text: statement.text, name });
          connection.parsedStatements[name] = statement.text;
          this.#prepared.set(i, name);
        }
        connection.bind({ statement: name, values: statement.values, valueMapper: runtime.utils.prepareValue });
        connection.describe({ type: 'P', name: '' });
        connection.execute({ portal: '', rows: 0 });
      }
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
  }

  #result(): ResultBuilder {
    return this.#results[this.#current]!;
  }

  handleRowDescription(message: Message): void {
    this.#result().addFields(message.fields);
  }

  handleDataRow(message: Message): void {
    if (this.#failure !== undefined) return;
    try {
      const result = this.#result();
      result.addRow(result.parseRow(message.fields));
    } catch (error) {
      // A value our parsers refuse: the statements ran; the answer cannot be read. Reported at the end.
      this.#failure = error;
    }
  }

  handleCommandComplete(message: Message): void {
    this.#result().addCommandComplete(message);
    this.#current += 1;
  }

  handleEmptyQuery(): void {
    this.#current += 1;
  }

  /**
   * The answers of the statements that completed before the pipeline failed, and the index of the
   * one that failed (the server refused it, or the connection failed while it ran): the statements
   * after it did not run. Undefined while none failed.
   */
  get failure(): { at: number; answered: pg.QueryResult[] } | undefined {
    return this.#failedAt === undefined ? undefined : { at: this.#failedAt, answered: this.#results.slice(0, this.#failedAt) };
  }

  /** The server refused a statement (it rolled back and skipped the rest) or the connection failed. */
  handleError(error: unknown): void {
    this.#failedAt ??= this.#current;
    this.#forgetUnsure(this.#failedAt);
    this.#reject(error);
  }

  /**
   * After a failure at `at`: the statements this pipeline prepared after it were skipped (never
   * prepared), and the one that failed may be prepared or not, or lost (a migration changed its
   * result's columns: 0A000; it was deallocated: 26000). Forgotten, so the next send on this
   * connection closes and prepares them again.
   */
  #forgetUnsure(at: number): void {
    const connection = this.#connection;
    if (!connection) return;
    const failed = this.#statements[at]?.name;
    if (failed !== undefined) delete connection.parsedStatements[failed];
    for (const [i, name] of this.#prepared) if (i > at) delete connection.parsedStatements[name];
  }

  handleReadyForQuery(): void {
    if (this.#failure !== undefined) this.#reject(this.#failure);
    else this.#resolve(this.#results);
  }

  handleCopyInResponse(connection: { sendCopyFail(message: string): void }): void {
    connection.sendCopyFail('No COPY in a pipeline');
  }

  handleCopyData(): void {}

  handlePortalSuspended(): void {}
}
