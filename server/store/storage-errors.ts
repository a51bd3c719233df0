/** Seconds a client is asked to wait before retrying a request that failed on storage. */
export const STORAGE_RETRY_AFTER_SECONDS = 5;

/**
 * The database could not be reached or used (its connection failed): the store's own error, with
 * the sentence an operator can act on. The domain turns it into its `StorageUnavailable`
 * (`domain/storage-unavailable.ts`), so the store knows nothing of the domain's errors.
 */
export class StorageFailure extends Error {
  override readonly name = 'StorageFailure';
}

/**
 * What went wrong with the database, in one sentence an operator can act on, for the SQLite result
 * codes that mean "the storage is failing" rather than "this request is wrong". Extended codes
 * (`SQLITE_IOERR_WRITE`, `SQLITE_READONLY_DBMOVED`, …) are matched by their primary code.
 */
const PROBLEMS: Array<[prefix: string, problem: string]> = [
  ['SQLITE_FULL', 'The database is out of disk space.'],
  ['SQLITE_IOERR', 'The database could not be read or written (I/O error).'],
  ['SQLITE_READONLY', 'The database is read-only: the server cannot write to its file or directory.'],
  ['SQLITE_CANTOPEN', 'The database file cannot be opened.'],
  ['SQLITE_BUSY', 'The database is locked by another process and stayed locked past the busy timeout.'],
  ['SQLITE_LOCKED', 'The database is locked and stayed locked past the busy timeout.'],
  ['SQLITE_CORRUPT', 'The database file is corrupt.'],
  ['SQLITE_NOTADB', 'The database file is not an SQLite database.'],
  ['SQLITE_PROTOCOL', 'The database lock protocol failed (another process holds the file).'],
  ['SQLITE_NOLFS', 'The database file is too large for this file system.'],
  ['SQLITE_NOMEM', 'The database ran out of memory.'],
];

/**
 * The same for PostgreSQL: SQLSTATEs that mean the server cannot take the request now (its class 08
 * connection errors, 53 out of resources, 57P0x shutting down, 25006 a read-only standby), and the
 * driver's network errors when the server cannot be reached.
 */
const PG_PROBLEMS: Array<[code: string, problem: string]> = [
  ['53100', 'The database is out of disk space.'],
  ['53200', 'The database ran out of memory.'],
  ['53300', 'The database has too many connections.'],
  ['53000', 'The database is out of resources.'],
  ['57P01', 'The database server is shutting down (administrator command).'],
  ['57P02', 'The database server is shutting down (crash of another backend).'],
  ['57P03', 'The database server is not accepting connections yet.'],
  ['25006', 'The database is read-only (a standby, or set read-only).'],
  ['58030', 'The database could not be read or written (I/O error).'],
];

/**
 * Network failures reaching the PostgreSQL server. These codes are not the database's own (an
 * outbound HTTP call fails with them too), so only the PostgreSQL store converts them, where it
 * knows the failure was its connection's (`postgresConnectionFailure`).
 */
const PG_CONNECTION_PROBLEMS: Record<string, string> = {
  ECONNREFUSED: 'The database server refused the connection.',
  ECONNRESET: 'The connection to the database server was reset.',
  ETIMEDOUT: 'The database server did not answer in time.',
  ENOTFOUND: 'The database server host name does not resolve.',
  EAI_AGAIN: 'The database server host name does not resolve.',
  EPIPE: 'The connection to the database server was cut.',
  EHOSTUNREACH: 'The database server cannot be reached.',
};

/** The sentence naming the storage problem behind `error`, or null when it is not a storage failure. */
export function storageProblem(error: unknown): string | null {
  const pgProblem = postgresProblem(error);
  if (pgProblem) return pgProblem;
  const code = codeOf(error);
  if (!code) return null;
  for (const [prefix, problem] of PROBLEMS) if (code === prefix || code.startsWith(`${prefix}_`)) return problem;
  return null;
}

function codeOf(error: unknown): string | null {
  if (typeof error !== 'object' || error === null || !('code' in error)) return null;
  const code = (error as { code: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : null;
}

function postgresProblem(error: unknown): string | null {
  if (typeof error !== 'object' || error === null) return null;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    for (const [known, problem] of PG_PROBLEMS) if (code === known) return problem;
    // Any other connection exception (class 08).
    if (/^08[0-9A-Z]{3}$/.test(code)) return 'The connection to the database server failed.';
  }
  return null;
}

/**
 * `error`, thrown by the PostgreSQL driver, as a `StorageFailure` when the connection failed
 * (refused, reset, timed out, terminated); any other error unchanged.
 */
export function postgresConnectionFailure(error: unknown): unknown {
  if (typeof error !== 'object' || error === null || error instanceof StorageFailure) return error;
  const code = (error as { code?: unknown }).code;
  const message = (error as { message?: unknown }).message;
  let problem = typeof code === 'string' ? PG_CONNECTION_PROBLEMS[code] : undefined;
  // The driver's own words when a pooled connection dies or the pool cannot connect in time.
  if (
    !problem &&
    typeof message === 'string' &&
    /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/.test(message)
  ) {
    problem = 'The connection to the database server failed.';
  }
  return problem ? new StorageFailure(problem) : error;
}
