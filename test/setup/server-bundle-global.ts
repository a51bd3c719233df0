import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { bundleServer } from '../../server/build.ts';
import { ROOT } from '../helpers/listening-child.ts';
import { SERVER_BUNDLE_ENV } from '../helpers/server-process.ts';

type Build = { outdir: string; users: number; built: Promise<void> };
const RUN = Symbol.for('cp-test-server-bundle');
const shared = globalThis as { [RUN]?: Build };

/**
 * Bundles the server once per run from the working tree, into a folder of the run, for
 * test/helpers/server-process.ts to start (what `npm start` runs, at half the CPU of a start from the
 * sources: docs/decisions/test-suite-time.md). Built at every run, never taken from server/dist/ or an
 * earlier run, so a stale bundle cannot be tested; removed when the last project ends. The folder is
 * directly in server/ as the bundle's chunks need (server/build.ts). Each project runs its global
 * setup in vitest's one main process: the first builds, the others wait for that build.
 */
export default async function setup() {
  shared[RUN] ??= (() => {
    const outdir = mkdtempSync(join(ROOT, 'server', '.dist-test-run-'));
    return { outdir, users: 0, built: bundleServer(outdir) };
  })();
  const build = shared[RUN];
  build.users += 1;
  await build.built;
  // The forked workers inherit the main process's environment; set at every run, whatever it held.
  process.env[SERVER_BUNDLE_ENV] = join(build.outdir, 'main.js');
  return () => {
    build.users -= 1;
    if (build.users > 0) return;
    rmSync(build.outdir, { recursive: true, force: true });
    delete shared[RUN];
  };
}
