import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The install command for a directory from its package-manager files, in the order the issue
 * gives: npm, yarn, pnpm, bun, then Python's. Null when there is nothing to install.
 */
export function detectInstallCommand(dir: string): string | null {
  const has = (name: string) => existsSync(join(dir, name));
  if (has('package-lock.json') || has('npm-shrinkwrap.json')) return 'npm ci';
  if (has('yarn.lock')) return 'yarn install --frozen-lockfile';
  if (has('pnpm-lock.yaml')) return 'pnpm install --frozen-lockfile';
  if (readdirSync(dir).some((name) => name.startsWith('bun.lock'))) return 'bun install --frozen-lockfile';
  if (has('package.json')) return 'npm install';
  if (has('uv.lock')) return 'uv sync --frozen';
  if (has('poetry.lock')) return 'poetry install --no-root';
  if (has('requirements.txt')) return 'pip install -r requirements.txt';
  if (has('pyproject.toml') || has('setup.py')) return 'pip install .';
  return null;
}
