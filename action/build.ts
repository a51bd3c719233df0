import { resolve } from 'node:path';
import { type BuildOptions, build } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '..');

/** The committed bundle: what `runs.main` in action.yml points at. */
export const DIST_FILE = resolve(ROOT, 'action/dist/index.js');

/**
 * One ESM file for Node 24 with every dependency inlined (a runner does not `npm install` an
 * Action). Deterministic: the same sources and lockfile give the same bytes, which is what lets a
 * test compare a fresh build with the committed one.
 */
export function bundleOptions(outfile: string): BuildOptions {
  return {
    absWorkingDir: ROOT,
    entryPoints: ['action/index.ts'],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    minify: false,
    sourcemap: false,
    legalComments: 'eof',
    charset: 'utf8',
    logLevel: 'warning',
    // A worktree whose node_modules is a symlink to a shared install must bundle the same bytes
    // (module paths appear in the bundle) as a checkout with its own node_modules.
    preserveSymlinks: true,
    // Some dependencies are CommonJS and call require() for Node's built-ins.
    banner: { js: "import { createRequire as __createRequire } from 'node:module';\nconst require = __createRequire(import.meta.url);" },
  };
}

/** Bundles the Action into `outfile`. */
export async function bundleAction(outfile = DIST_FILE): Promise<void> {
  await build(bundleOptions(outfile));
}

if (import.meta.main) {
  await bundleAction();
  console.log(`bundled ${DIST_FILE}`);
}
