import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detectInstallCommand } from '../../agent/detect.ts';
import { readGraphConfig } from '../../agent/graph-config.ts';

/** A directory holding exactly these (empty) files. */
function dirWith(...files: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'cp-detect-'));
  for (const file of files) writeFileSync(join(dir, file), '');
  return dir;
}

describe('what the local agent reads from a repository', () => {
  it('detects the install command from the package-manager files, npm first, Python last', () => {
    expect(detectInstallCommand(dirWith('package.json', 'package-lock.json', 'yarn.lock'))).toBe('npm ci');
    expect(detectInstallCommand(dirWith('package.json', 'yarn.lock'))).toBe('yarn install --frozen-lockfile');
    expect(detectInstallCommand(dirWith('package.json', 'pnpm-lock.yaml'))).toBe('pnpm install --frozen-lockfile');
    expect(detectInstallCommand(dirWith('package.json', 'bun.lockb'))).toBe('bun install --frozen-lockfile');
    expect(detectInstallCommand(dirWith('package.json', 'bun.lock'))).toBe('bun install --frozen-lockfile');
    expect(detectInstallCommand(dirWith('package.json'))).toBe('npm install');
    expect(detectInstallCommand(dirWith('requirements.txt'))).toBe('pip install -r requirements.txt');
    expect(detectInstallCommand(dirWith('pyproject.toml', 'uv.lock'))).toBe('uv sync --frozen');
    expect(detectInstallCommand(dirWith('pyproject.toml'))).toBe('pip install .');
    expect(detectInstallCommand(dirWith('README.md'))).toBeNull();
  });

  it('tells JavaScript graphs from Python ones, and refuses a config with no graphs', () => {
    const dir = dirWith();
    const write = (config: unknown) => {
      writeFileSync(join(dir, 'langgraph.json'), JSON.stringify(config));
      return join(dir, 'langgraph.json');
    };
    expect(readGraphConfig(write({ node_version: '20', graphs: { agent: './src/graph.ts:graph' } }))).toMatchObject({
      language: 'javascript',
      graphs: ['agent'],
    });
    expect(readGraphConfig(write({ graphs: { agent: './agent.py:graph' }, dependencies: ['.'] }))).toMatchObject({ language: 'python', graphs: ['agent'] });
    expect(readGraphConfig(write({ python_version: '3.12', graphs: { a: { path: './a.py:g' } } })).language).toBe('python');
    expect(() => readGraphConfig(write({ graphs: {} }))).toThrow(/declares no graphs/);
    writeFileSync(join(dir, 'broken.json'), '{');
    expect(() => readGraphConfig(join(dir, 'broken.json'))).toThrow(/could not be read as JSON/);
  });
});
