import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { builtScriptHash, bundleServer, keepOnlyCurrentCodeCache } from '../../server/build.ts';
import { isCodeCacheFile } from '../../server/code-cache.ts';
import { ROOT } from '../helpers/listening-child.ts';
import { COMPILE_CACHE, SERVER_BUNDLE_ENV } from '../helpers/server-process.ts';

type Build = { outdir: string; users: number; built: Promise<void>; rebuilding: Promise<void> | null };
const RUN = Symbol.for('cp-test-server-bundle');
/** The run's folder is named by vitest's process, so a run that was killed can be told by its dead process. */
const FOLDER = /^\.dist-test-run-(\d+)-/;
const shared = globalThis as { [RUN]?: Build };

/**
 * Bundles the server once per run from the working tree, into a folder of the run, for
 * test/helpers/server-process.ts to start (what `npm start` runs, at half the CPU of a start from the
 * sources: docs/decisions/test-suite-time.md). Built at every run, and again before every rerun of
 * watch mode (the sources may have changed), never taken from server/dist/ or an earlier run, so a
 * stale bundle cannot be tested; removed when the last project ends. The folder is directly in
 * server/ as the bundle's chunks need (server/build.ts). Each project runs its global setup in
 * vitest's one main process: the first builds, the others wait for that build.
 */
export default async function setup(project: TestProject) {
  shared[RUN] ??= (() => {
    removeKilledRuns();
    const outdir = mkdtempSync(join(ROOT, 'server', `.dist-test-run-${process.pid}-`));
    const built = bundleServer(outdir).then(() => removeOtherScriptsCodeCaches(outdir));
    return { outdir, users: 0, built, rebuilding: null };
  })();
  const build = shared[RUN];
  build.users += 1;
  await build.built;
  // The forked workers inherit the main process's environment; set at every run, whatever it held.
  process.env[SERVER_BUNDLE_ENV] = join(build.outdir, 'main.js');
  // Every project's hook runs at a rerun: one build serves them all.
  project.onTestsRerun(async () => {
    build.rebuilding ??= bundleServer(build.outdir).finally(() => (build.rebuilding = null));
    await build.rebuilding;
  });
  return () => {
    build.users -= 1;
    if (build.users > 0) return;
    rmSync(build.outdir, { recursive: true, force: true });
    delete shared[RUN];
  };
}

/** Removes the folders of runs killed before their teardown (another run going on in this checkout keeps its own). */
function removeKilledRuns(): void {
  for (const name of readdirSync(join(ROOT, 'server'))) {
    const pid = FOLDER.exec(name)?.[1];
    if (pid && !alive(Number(pid))) rmSync(join(ROOT, 'server', name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it is there, another user's.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The test servers share one cache folder (COMPILE_CACHE) across runs and checkouts: each changed
 * bundle leaves a code cache of ~3.4 MB for its script there (server/code-cache.ts). Those of other
 * scripts are removed at the start of a run (a run in another checkout that still needs its own
 * only writes it again); Node's own entries, in folders of their own, are left to Node.
 */
function removeOtherScriptsCodeCaches(outdir: string): void {
  if (!existsSync(COMPILE_CACHE)) return;
  keepOnlyCurrentCodeCache(COMPILE_CACHE, builtScriptHash(outdir), isCodeCacheFile);
}
