import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/listening-child.ts';

/**
 * `npm install` in a fresh clone must leave the committed lock file as it is (`git status` clean).
 * npm rewrites an entry whose package has an install script but whose lock entry lacks
 * `"hasInstallScript": true` (better-sqlite3's did): this checks every installed package against
 * its entry, in milliseconds, instead of a two-minute install.
 */
describe('package-lock.json', () => {
  it('marks every installed package that has an install script, as npm install would write it', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { hasInstallScript?: boolean; link?: boolean }>;
    };
    const missing: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      if (path === '' || entry.link) continue;
      const manifestPath = join(ROOT, path, 'package.json');
      if (!existsSync(manifestPath)) continue; // an optional package of another platform
      const scripts = (JSON.parse(readFileSync(manifestPath, 'utf8')) as { scripts?: Record<string, string> }).scripts ?? {};
      const hasInstallScript =
        Boolean(scripts.preinstall || scripts.install || scripts.postinstall) || (existsSync(join(ROOT, path, 'binding.gyp')) && !scripts.install);
      if (hasInstallScript && entry.hasInstallScript !== true) missing.push(path);
    }
    expect(missing).toEqual([]);
  });
});
