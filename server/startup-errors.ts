import { statSync } from 'node:fs';
import { storageProblem } from './store/storage-errors.ts';

/** A reason the server cannot start, in one sentence for the operator; printed without a stack. */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}

const FILE_SYSTEM_CAUSES: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'the file system is read-only',
  ENOSPC: 'the disk is full',
  ENOTDIR: 'a part of the path is not a directory',
  EEXIST: 'a part of the path exists and is not a directory',
  EISDIR: 'the path is a directory',
  ENOENT: 'the directory does not exist',
  ENAMETOOLONG: 'the path is too long',
};

/**
 * Turns a failure to open or prepare the database (or the key file beside it) into one sentence
 * naming the path and the cause; null for anything else, which keeps its stack.
 */
export function databaseStartupError(error: unknown, databasePath: string): StartupError | null {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  if (typeof code !== 'string') return null;
  let cause = FILE_SYSTEM_CAUSES[code];
  if (!cause && code.startsWith('SQLITE_CANTOPEN'))
    cause = isDirectory(databasePath) ? 'the path is a directory' : 'the file cannot be opened or created there';
  if (!cause)
    cause = storageProblem(error)
      ?.replace(/^The database (is |was )?/, '')
      .replace(/\.$/, '');
  if (!cause) return null;
  return new StartupError(`Cannot open the database at ${databasePath}: ${cause} (set DATABASE_URL to a writable file path).`);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
