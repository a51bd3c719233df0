import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkoutSource } from '../../agent/git.ts';

/**
 * The agent's checkout of a revision's source (agent/git.ts): the clone writes no tree of its own
 * when a commit or a ref is checked out after it, so what the checkout holds is that commit's
 * tree alone, with nothing left of the default branch's.
 */
describe("the agent's checkout of a git source", () => {
  const root = mkdtempSync(join(tmpdir(), 'cp-git-checkout-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', ['-c', 'user.email=agent@example.test', '-c', 'user.name=agent', ...args], { cwd, encoding: 'utf8' }).trim();
  const bare = join(root, 'remote.git');
  const work = join(root, 'work');
  git(root, 'init', '-q', '--bare', '--initial-branch=main', bare);
  git(root, 'clone', '-q', `file://${bare}`, work);
  writeFileSync(join(work, 'old.txt'), 'only in the first commit');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'first');
  const first = git(work, 'rev-parse', 'HEAD');
  git(work, 'rm', '-q', 'old.txt');
  writeFileSync(join(work, 'new.txt'), 'only on main');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'second');
  const second = git(work, 'rev-parse', 'HEAD');
  git(work, 'push', '-q', 'origin', 'HEAD:refs/heads/main');
  git(work, 'push', '-q', 'origin', `${first}:refs/heads/old`);

  // Every checkout git makes of a tree (the clone's own included) runs its post-checkout hook: this one counts them.
  const hooks = join(root, 'hooks');
  const checkouts = join(root, 'checkouts.log');
  mkdirSync(hooks);
  writeFileSync(join(hooks, 'post-checkout'), `#!/bin/sh\necho "$PWD" >> '${checkouts}'\n`);
  chmodSync(join(hooks, 'post-checkout'), 0o755);
  const checkoutsOf = (dir: string) =>
    existsSync(checkouts)
      ? readFileSync(checkouts, 'utf8')
          .split('\n')
          .filter((line) => line === dir).length
      : 0;

  const checkout = (source: { commit_sha?: string; ref?: string }, name: string) => {
    const dir = join(root, name);
    const env = { PATH: process.env.PATH, GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'core.hooksPath', GIT_CONFIG_VALUE_0: hooks };
    const options = { env, signal: new AbortController().signal, onLine: () => undefined };
    return {
      dir,
      sha: checkoutSource({ type: 'git', repo_url: `file://${bare}`, commit_sha: null, ref: null, token: null, ...source } as never, dir, options),
    };
  };

  it('checks out the pushed commit, and only its tree, though the default branch has moved on', async () => {
    const { dir, sha } = checkout({ commit_sha: first }, 'by-commit');
    expect(await sha).toBe(first);
    expect(readFileSync(join(dir, 'old.txt'), 'utf8')).toBe('only in the first commit');
    expect(existsSync(join(dir, 'new.txt'))).toBe(false);
    expect(git(dir, 'status', '--porcelain')).toBe('');
    // The commit's tree written once: the clone wrote none of the default branch's first.
    expect(checkoutsOf(dir)).toBe(1);
  });

  it('checks out the head of a ref, and the default branch when neither is named', async () => {
    const byRef = checkout({ ref: 'old' }, 'by-ref');
    expect(await byRef.sha).toBe(first);
    expect(existsSync(join(byRef.dir, 'new.txt'))).toBe(false);
    expect(git(byRef.dir, 'status', '--porcelain')).toBe('');
    expect(checkoutsOf(byRef.dir)).toBe(1);
    const byDefault = checkout({}, 'by-default');
    expect(await byDefault.sha).toBe(second);
    expect(readFileSync(join(byDefault.dir, 'new.txt'), 'utf8')).toBe('only on main');
    expect(existsSync(join(byDefault.dir, 'old.txt'))).toBe(false);
    expect(checkoutsOf(byDefault.dir)).toBe(1);
  });
});
