import { STORAGE_RETRY_AFTER_SECONDS, StorageFailure, storageProblem } from '../store/storage-errors.ts';
import { StorageUnavailable } from './errors.ts';

/**
 * `error` as a `StorageUnavailable` (503 with `Retry-After`) when it is a storage failure: already
 * one, the store's `StorageFailure` (a lost database connection), or a database error whose code
 * means the storage is failing rather than the request being wrong; null for anything else.
 */
export function asStorageUnavailable(error: unknown): StorageUnavailable | null {
  if (error instanceof StorageUnavailable) return error;
  const problem = error instanceof StorageFailure ? error.message : storageProblem(error);
  return problem ? new StorageUnavailable(problem, { retryAfterSeconds: STORAGE_RETRY_AFTER_SECONDS }) : null;
}
