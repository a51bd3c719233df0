import { resolve } from 'node:path';
import { build } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '..');

/** Where `npm start` runs the server from (not committed: built at every start). */
export const SERVER_BUNDLE = resolve(ROOT, 'server/dist/main.js');

/**
 * Bundles the server's TypeScript into one ESM file; packages stay in node_modules. Running the
 * sources directly makes Node load its TypeScript stripper at start, which costs about 35 MB of
 * resident memory for as long as the server runs (measured: 123 MB vs 88 MB idle RSS).
 */
export async function bundleServer(outfile = SERVER_BUNDLE): Promise<void> {
  await build({
    absWorkingDir: ROOT,
    entryPoints: ['server/main.ts'],
    outfile,
    bundle: true,
    packages: 'external',
    platform: 'node',
    format: 'esm',
    target: 'node24',
    sourcemap: 'linked',
    logLevel: 'warning',
  });
}

if (import.meta.main) await bundleServer();
