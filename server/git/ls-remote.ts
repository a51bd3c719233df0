import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitTokenEnv } from '../../shared/git-auth.ts';

/**
 * Reads a branch head from a remote; null when the branch does not exist there. `token`: an
 * installation token for a private repository on the GitHub App's host.
 */
export type BranchHeadReader = (repoUrl: string, branch: string, token?: string) => Promise<string | null>;

/** More than any ls-remote of one ref answers; a remote that sends more is cut off. */
const OUTPUT_LIMIT = 1024 * 1024;

/**
 * Process groups of the reads under way. Each runs detached (so its time limit can reach git's
 * helpers), which also means it would outlive the server: they are killed when the process exits.
 */
const running = new Set<number>();
let exitHookInstalled = false;
function killAllOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const pgid of running) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

/**
 * `git ls-remote <url> refs/heads/<branch>` as a tenant's URL deserves: nothing of the server's
 * user is used. Git runs with an empty temporary HOME and no system or global config (so no
 * credential helper, `insteadOf` or SSH key of the operator), `credential.helper` emptied, no
 * prompts, only the https (and, when `allowFile`, file) transport, no redirects, and an SSH command
 * without identities in case anything still reaches for ssh. The whole process group is killed at
 * the time limit (git's https helper is a child of git and would otherwise keep the connection).
 * `url` must already have passed `reconcileTarget`.
 */
export function lsRemoteBranchHead(options: { timeoutMs?: number; allowFile?: boolean } = {}): BranchHeadReader {
  const timeoutMs = options.timeoutMs ?? 20_000;
  return async (repoUrl, branch, token) => {
    const home = await mkdtemp(join(tmpdir(), 'cp-git-home-'));
    try {
      return await run(repoUrl, branch, home, timeoutMs, options.allowFile ?? false, token);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  };
}

function run(repoUrl: string, branch: string, home: string, timeoutMs: number, allowFile: boolean, token: string | undefined): Promise<string | null> {
  const args = [
    '-c',
    'credential.helper=',
    '-c',
    'protocol.allow=never',
    '-c',
    'protocol.https.allow=always',
    ...(allowFile ? ['-c', 'protocol.file.allow=always'] : []),
    // Plain http only reaches the GitHub App's own host when GITHUB_URL is http (remote-policy.ts decides).
    ...(repoUrl.startsWith('http://') ? ['-c', 'protocol.http.allow=always'] : []),
    '-c',
    'http.followRedirects=false',
    'ls-remote',
    '--',
    repoUrl,
    `refs/heads/${branch}`,
  ];
  const child = spawn('git', args, {
    // A process group of its own, so the time limit reaches git's helpers too.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Only what git needs: none of the server's secrets (ENCRYPTION_KEY, webhook secrets) or its HOME.
    // A token goes to git through its environment only (never argv, where `ps` shows it).
    env: withToken(repoUrl, token, {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      XDG_CONFIG_HOME: home,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_TERMINAL_PROMPT: '0',
      GIT_PROTOCOL_FROM_USER: '0',
      GIT_SSH_COMMAND: 'ssh -F /dev/null -o IdentitiesOnly=yes -i /dev/null -o BatchMode=yes',
    }),
  });
  killAllOnExit();
  const pgid = child.pid;
  if (pgid !== undefined) running.add(pgid);
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    let failure: string | null = null;
    const killGroup = (why: string | null) => {
      if (why !== null) failure ??= why;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => killGroup(`timed out after ${timeoutMs} ms`), timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      if (stdout.length > OUTPUT_LIMIT) killGroup('the remote answered more than 1 MiB');
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      if (stderr.length < 8192) stderr += chunk;
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      if (pgid !== undefined) running.delete(pgid);
      reject(new Error(`git ls-remote failed: ${error.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      // Whatever git left behind goes with it.
      killGroup(null);
      if (pgid !== undefined) running.delete(pgid);
      if (failure !== null) return reject(new Error(`git ls-remote failed: ${failure}`));
      if (code !== 0) {
        const lines = stderr.trim().split('\n');
        return reject(new Error(`git ls-remote failed: ${lines.find((l) => l.startsWith('fatal:')) ?? lines[0] ?? `exit code ${code}`}`));
      }
      const line = stdout.split('\n').find((l) => l.endsWith(`\trefs/heads/${branch}`));
      const sha = line?.split('\t')[0];
      resolve(sha && /^[0-9a-f]{40,64}$/.test(sha) ? sha : null);
    });
  });
}

function withToken(repoUrl: string, token: string | undefined, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return token ? gitTokenEnv(env, repoUrl, token) : env;
}
