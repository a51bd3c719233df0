import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * Where the demo's agent keeps its builds for the demo folder `dir`: apart from it, under the
 * system temp folder. As root the agent's sandboxes run as an unprivileged user, who must be able
 * to pass through every folder above the work directory (a clone under /root, or a mkdtemp folder,
 * is closed to it), and the servers' sockets want a short path.
 */
export function demoAgentWorkDir(dir: string): string {
  return join(tmpdir(), `acp-demo-${createHash('sha256').update(resolve(dir)).digest('hex').slice(0, 12)}`);
}
