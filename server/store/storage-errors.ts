import { StorageUnavailable } from '../domain/errors.ts';

/** Seconds a client is asked to wait before retrying a request that failed on storage. */
export const STORAGE_RETRY_AFTER_SECONDS = 5;

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

/** The sentence naming the storage problem behind `error`, or null when it is not a storage failure. */
export function storageProblem(error: unknown): string | null {
  const code = codeOf(error);
  if (!code) return null;
  for (const [prefix, problem] of PROBLEMS) if (code === prefix || code.startsWith(`${prefix}_`)) return problem;
  return null;
}

/** `error` as a `StorageUnavailable` when it is a storage failure (already one, or an SQLite code above). */
export function asStorageUnavailable(error: unknown): StorageUnavailable | null {
  if (error instanceof StorageUnavailable) return error;
  const problem = storageProblem(error);
  return problem ? new StorageUnavailable(problem, { retryAfterSeconds: STORAGE_RETRY_AFTER_SECONDS }) : null;
}

function codeOf(error: unknown): string | null {
  if (typeof error !== 'object' || error === null || !('code' in error)) return null;
  const code = (error as { code: unknown }).code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : null;
}
