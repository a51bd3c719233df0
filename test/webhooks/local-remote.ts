import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', '-c', 'init.defaultBranch=main', ...args], {
    cwd,
    encoding: 'utf8',
  }).trim();
}

/** A bare repository (the "remote", a real git repository on disk) and a clone that pushes to it over file://. */
export function localRemote() {
  const root = mkdtempSync(join(tmpdir(), 'cp-git-'));
  const bare = join(root, 'remote.git');
  const work = join(root, 'work');
  git(root, 'init', '--bare', '--initial-branch=main', bare);
  git(root, 'clone', `file://${bare}`, work);
  const commit = (message: string) => {
    writeFileSync(join(work, 'agent.py'), `# ${message}\n`);
    git(work, 'add', 'agent.py');
    git(work, 'commit', '-m', message);
    git(work, 'push', 'origin', 'HEAD:refs/heads/main');
    return git(work, 'rev-parse', 'HEAD');
  };
  return { url: `file://${bare}`, bare, commit };
}
