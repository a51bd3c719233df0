import { execFile } from 'node:child_process';

/** Reads a branch head from a remote; null when the branch does not exist there. */
export type BranchHeadReader = (repoUrl: string, branch: string) => Promise<string | null>;

/**
 * `git ls-remote <url> refs/heads/<branch>`, with a time limit and no prompts: a repository that
 * needs credentials the server does not have fails fast instead of waiting for a terminal.
 */
export function lsRemoteBranchHead(timeoutMs = 20_000): BranchHeadReader {
  return (repoUrl, branch) =>
    new Promise((resolve, reject) => {
      execFile(
        'git',
        ['ls-remote', '--', repoUrl, `refs/heads/${branch}`],
        {
          timeout: timeoutMs,
          maxBuffer: 1024 * 1024,
          // Only what git needs: the server's own secrets (ENCRYPTION_KEY, webhook secrets) stay out of the child.
          env: {
            PATH: process.env.PATH ?? '/usr/bin:/bin',
            HOME: process.env.HOME ?? '/nonexistent',
            GIT_TERMINAL_PROMPT: '0',
            GIT_ASKPASS: 'echo',
            SSH_ASKPASS: 'echo',
            GIT_SSH_COMMAND: 'ssh -o BatchMode=yes',
          },
        },
        (error, stdout, stderr) => {
          if (error) {
            const lines = String(stderr).trim().split('\n');
            reject(new Error(`git ls-remote failed: ${lines.find((l) => l.startsWith('fatal:')) ?? lines[0] ?? error.message}`));
            return;
          }
          const line = String(stdout)
            .split('\n')
            .find((l) => l.endsWith(`\trefs/heads/${branch}`));
          const sha = line?.split('\t')[0];
          resolve(sha && /^[0-9a-f]{40,64}$/.test(sha) ? sha : null);
        },
      );
    });
}
