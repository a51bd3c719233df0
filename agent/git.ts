import { gitTokenEnv } from '../shared/git-auth.ts';
import type { WorkSource } from '../shared/schemas/agent.ts';
import { runCommand } from './processes.ts';

/** Quotes a value for `sh -c`. */
export function quote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/**
 * Clones the repository into `dir` and checks out the pushed commit, or else the head of the
 * ref (a branch name or `refs/heads/…`); answers the commit it checked out.
 */
export async function checkoutSource(
  source: Extract<WorkSource, { type: 'git' }>,
  dir: string,
  options: { env: NodeJS.ProcessEnv; signal: AbortSignal; onLine: (line: string) => void },
): Promise<string> {
  // The token reaches git through its environment alone: never the command line, the log or .git/config.
  const base = { ...options.env, GIT_TERMINAL_PROMPT: '0' };
  const env = source.token ? gitTokenEnv(base, source.repo_url, source.token) : base;
  const git = async (args: string, cwd: string) => {
    const result = await runCommand(`git ${args}`, { cwd, env, signal: options.signal, onLine: options.onLine });
    if (result.aborted) throw new Aborted();
    if (result.code !== 0) throw new Error(`git ${args.split(' ')[0]} failed (exit code ${result.code}): ${result.lastLines.slice(-5).join(' | ')}`);
    return result.lastLines;
  };
  // Values from the work item are never read as options: --end-of-options, and a commit must be hex.
  if (source.commit_sha && !/^[0-9a-f]{7,64}$/i.test(source.commit_sha)) throw new Error(`'${source.commit_sha}' is not a commit id`);
  // Where a commit or a ref is checked out next, the clone writes no files of its own (the default
  // branch's tree, which the checkout would then rewrite): one checkout of the tree, not two.
  const noCheckout = source.commit_sha || source.ref ? '--no-checkout ' : '';
  await git(`clone --quiet ${noCheckout}--end-of-options ${quote(source.repo_url)} ${quote(dir)}`, '/');
  if (source.commit_sha) {
    await git(`checkout --quiet --detach ${quote(source.commit_sha)}`, dir);
  } else if (source.ref) {
    await git(`fetch --quiet --end-of-options origin ${quote(source.ref)}`, dir);
    await git('checkout --quiet --detach FETCH_HEAD', dir);
  }
  const lines = await git('rev-parse HEAD', dir);
  const sha = lines.at(-1)?.trim() ?? '';
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(sha)) throw new Error(`git rev-parse answered '${sha}', not a commit id`);
  return sha;
}

/** The work was interrupted (the control plane said so, or the agent is stopping). */
export class Aborted extends Error {
  override readonly name = 'Aborted';
}
