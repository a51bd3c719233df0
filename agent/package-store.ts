import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Installed packages kept per deployment and reused while the lock file stays the same: a push
 * that changes only code skips `npm ci` (most of push → serving). The installed `node_modules` is
 * moved into `<work-dir>/<deployment>/packages/<key>/` once its build finished, and every revision
 * with that key gets it bound read-only at its checkout's `node_modules`: shared, and no build can
 * change what another revision runs with.
 */
const COMPLETE = 'complete';

/**
 * What decides the installed packages: `npm ci`'s inputs (package.json, package-lock.json) and the
 * Node version. Null when the install is not `npm ci` from a lock file (other package managers,
 * or a custom install_command, are run every time).
 */
export function packagesKey(cwd: string, installCommand: string | null): string | null {
  if (installCommand !== 'npm ci') return null;
  const hash = createHash('sha256').update(process.version);
  for (const file of ['package.json', 'package-lock.json']) {
    const path = join(cwd, file);
    try {
      if (!lstatSync(path).isFile()) return null;
      hash.update(`\0${file}\0`).update(readFileSync(path));
    } catch {
      return null;
    }
  }
  return hash.digest('hex').slice(0, 32);
}

export function packagesDir(workDir: string, deploymentId: string, key: string): string {
  return join(workDir, deploymentId, 'packages', key);
}

/** The kept `node_modules` for `key`, when a finished build stored it. */
export function storedPackages(workDir: string, deploymentId: string, key: string): string | null {
  const dir = packagesDir(workDir, deploymentId, key);
  return existsSync(join(dir, COMPLETE)) ? join(dir, 'node_modules') : null;
}

/** Moves the checkout's installed `node_modules` into the store (a rename: no copy). Answers where it went, or null. */
export function storePackages(workDir: string, deploymentId: string, key: string, cwd: string): string | null {
  const installed = join(cwd, 'node_modules');
  try {
    if (!lstatSync(installed).isDirectory()) return null;
  } catch {
    return null;
  }
  const dir = packagesDir(workDir, deploymentId, key);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  renameSync(installed, join(dir, 'node_modules'));
  mkdirSync(installed);
  writeFileSync(join(dir, COMPLETE), '');
  return join(dir, 'node_modules');
}

/** Removes the stored packages no revision of the deployment names any more. */
export function prunePackages(workDir: string, deploymentId: string, inUse: Set<string>): void {
  const root = join(workDir, deploymentId, 'packages');
  if (!existsSync(root)) return;
  for (const key of readdirSync(root)) if (!inUse.has(key)) rmSync(join(root, key), { recursive: true, force: true });
}
