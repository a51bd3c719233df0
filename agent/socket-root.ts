import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The longest folder whose sockets fit a unix socket's path of at most 107 bytes: a sandboxed
 * server's is `<root>/.s/<revision uuid>/server.sock` (the proxy's control socket,
 * `<root>/.proxy/control.sock`, is shorter).
 */
export const MAX_SOCKET_ROOT = 107 - '/.s/'.length - 36 - '/server.sock'.length;

/**
 * Where the agent of `workDir` keeps its unix sockets: the work directory itself when short
 * enough, else a short folder under the system's temporary directory named by a hash of the work
 * directory's real path (`<tmp>/acp-<12 hex>`), so the agent restarted on the same work directory
 * finds the sockets its proxy and live servers still use. Pure: `makeSocketRoot` creates it.
 */
export function socketRootOf(workDir: string): string {
  if (Buffer.byteLength(workDir) <= MAX_SOCKET_ROOT) return workDir;
  let real = workDir;
  try {
    real = realpathSync(workDir);
  } catch {
    // not made yet: its path as given (the agent makes it before it needs the sockets)
  }
  return join(tmpdir(), `acp-${createHash('sha256').update(real).digest('hex').slice(0, 12)}`);
}

/**
 * Makes the socket root of `workDir` (when it is not the work directory itself) with `mode`, and
 * checks it is a folder of the agent's own user: the temporary directory is everyone's, and a
 * folder or link another user made there first must never receive the agent's sockets.
 */
export function makeSocketRoot(workDir: string, mode: number): string {
  const root = socketRootOf(workDir);
  if (root === workDir) return root;
  if (Buffer.byteLength(root) > MAX_SOCKET_ROOT)
    throw new Error(
      `the work directory ${workDir} is too long for unix sockets (107 bytes), and so is the temporary directory that would hold them instead (${root}): use a shorter --work-dir or TMPDIR`,
    );
  mkdirSync(root, { recursive: true, mode });
  const made = lstatSync(root);
  const uid = process.getuid?.();
  if (!made.isDirectory() || made.isSymbolicLink() || (uid !== undefined && made.uid !== uid))
    throw new Error(
      `${root} (where the agent of ${workDir} keeps its sockets) exists and is not a folder of the agent's own user: remove it, or set another TMPDIR`,
    );
  chmodSync(root, mode);
  return root;
}
