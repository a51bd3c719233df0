import { chmodSync, closeSync, fchmodSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * What the server keeps on disk (the database with its WAL and shared-memory files, which hold
 * uploaded tarballs and every record; the key file) is readable by its owner only, whatever the
 * umask: 0600 files in 0700 folders. A mode given to `open` or `mkdir` is narrowed by the umask but
 * never widened, and a file made before (by an older run, a copy, a restore) keeps its own mode,
 * so modes are set explicitly and checked again at every start.
 */
export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** Creates the folders of `dir` that do not exist yet, each 0700; folders that exist are left as they are (they may be shared, like /tmp). */
export function makePrivateDir(dir: string): void {
  const missing: string[] = [];
  for (let at = resolve(dir); statSync(at, { throwIfNoEntry: false }) === undefined; at = dirname(at)) {
    missing.push(at);
    if (dirname(at) === at) break;
  }
  if (missing.length === 0) return;
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  for (const created of missing) chmodSync(created, PRIVATE_DIR_MODE);
}

/** Creates `path` empty and 0600 when it does not exist (SQLite then gives its WAL and shared-memory files the same mode). */
export function createPrivateFile(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, 'wx', PRIVATE_FILE_MODE);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw error;
  }
  try {
    fchmodSync(fd, PRIVATE_FILE_MODE);
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes each existing file of `paths` 0600 when group or others had any access to it, and answers
 * the ones it changed with their old mode (for the caller's warning). Files it cannot change (not
 * its owner) are answered with `fixed: false`.
 */
export function tightenFileModes(paths: readonly string[]): Array<{ path: string; mode: string; fixed: boolean }> {
  const loose: Array<{ path: string; mode: string; fixed: boolean }> = [];
  for (const path of paths) {
    const stat = statSync(path, { throwIfNoEntry: false });
    if (!stat?.isFile() || (stat.mode & 0o077) === 0) continue;
    const mode = `0${(stat.mode & 0o777).toString(8)}`;
    try {
      chmodSync(path, PRIVATE_FILE_MODE);
      loose.push({ path, mode, fixed: true });
    } catch {
      loose.push({ path, mode, fixed: false });
    }
  }
  return loose;
}
