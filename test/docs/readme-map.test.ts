import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** The lines of the README's map of the tree (its first fenced block that starts with a folder). */
function mapLines(): string[] {
  const readme = readFileSync(resolve(ROOT, 'README.md'), 'utf8');
  const block = [...readme.matchAll(/```\n([\s\S]*?)```/g)].map((m) => m[1]!).find((text) => /^server\/\s/m.test(text));
  return (block ?? '').split('\n');
}

describe("the README's map of the tree", () => {
  it('names every folder of server/ and each file it names at its root exists', () => {
    const lines = mapLines();
    // The folders git tracks (a build's server/dist/ is not part of the tree).
    const tracked = execFileSync('git', ['ls-files', 'server'], { cwd: ROOT, encoding: 'utf8' }).split('\n');
    const folders = [...new Set(tracked.filter((path) => path.split('/').length > 2).map((path) => `${path.split('/')[1]}/`))];
    expect(folders.filter((folder) => !lines.some((line) => line.startsWith(`  ${folder}`)))).toEqual([]);
    const named = lines
      .filter((line) => /^ {2}\S/.test(line))
      .flatMap((line) =>
        line
          .trim()
          .split(/\s{2,}/)[0]!
          .split(/,\s*/),
      );
    const missing = named.filter((name) => name.endsWith('.ts')).filter((name) => !readdirSync(resolve(ROOT, 'server')).includes(name));
    expect(missing).toEqual([]);
  });
});
