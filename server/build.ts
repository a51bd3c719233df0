import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { build, type Plugin } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '..');

/** Where `npm start` runs the server from (not committed: built at every start). */
export const SERVER_BUNDLE = resolve(ROOT, 'server/dist/main.js');

/**
 * zod's API re-exports every one of its locales (`z.locales`, some 300 KB of the bundle) though only
 * English, its default, is used here: the bundle gets that one alone. `z.locales.<other>` would be
 * undefined; nothing in the server asks for one.
 */
const zodEnglishOnly: Plugin = {
  name: 'zod-english-only',
  setup(build) {
    build.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, (args) => ({
      contents: "export { default as en } from './en.js';",
      resolveDir: dirname(args.path),
    }));
  },
};

/**
 * prom-client's process CPU metric requires all of OpenTelemetry's API when it is loaded, for the
 * exemplars (trace ids beside a sample) it reads only when they are enabled, which the server never
 * does (server/metrics.ts): a tenth of the start's module evaluation went there. The bundle gets
 * that require made on first use instead. A prom-client whose file no longer has the line fails the
 * build rather than quietly loading it again.
 */
const promClientOtelOnUse: Plugin = {
  name: 'prom-client-otel-on-use',
  setup(build) {
    build.onLoad({ filter: /[\\/]prom-client[\\/]lib[\\/]metrics[\\/]processCpuTotal\.js$/ }, (args) => {
      const eager = "const OtelApi = require('@opentelemetry/api');";
      const source = readFileSync(args.path, 'utf8');
      if (!source.includes(eager)) throw new Error(`${args.path}: the require of @opentelemetry/api this build defers is gone; update server/build.ts`);
      const onUse =
        "let otelApi; const OtelApi = { get trace() { return (otelApi ??= require('@opentelemetry/api')).trace; }, get context() { return (otelApi ??= require('@opentelemetry/api')).context; } };";
      return { contents: source.replace(eager, onUse), loader: 'js' };
    });
  },
};

/**
 * Bundles the server's TypeScript and its packages into `server/dist/` (ESM): `main.js`, the entry
 * (server/bundle-entry.ts, which turns on Node's compile cache), and chunks beside it: the server
 * itself, and one per `import()` of what the first request does not need (PostgreSQL's driver,
 * OpenTelemetry, the GitHub App's JWTs…), loaded when first used.
 *
 * Why bundle the packages too: resolving and compiling some 400 files of node_modules was most of
 * the start (docs/decisions/server-start.md). Only what cannot be bundled stays in node_modules:
 * better-sqlite3 (a native addon, found by its path) and pg-native (an optional native driver pg
 * asks for only when told to). CommonJS packages `require` Node's built-ins, which ESM output has
 * no `require` for: the banner gives each chunk one. Running the sources directly makes Node load
 * its TypeScript stripper at start, which costs about 35 MB of resident memory for as long as the
 * server runs. `outdir` (server/dist/ by default) must be a folder directly in server/, for the same
 * reason as the chunk names below.
 */
export async function bundleServer(outdir = dirname(SERVER_BUNDLE)): Promise<void> {
  const { metafile } = await build({
    absWorkingDir: ROOT,
    entryPoints: { main: 'server/bundle-entry.ts' },
    outdir,
    // Chunks stay in the entry's folder: server/console/assets.ts finds its files relative to its chunk.
    chunkNames: '[name]-[hash]',
    bundle: true,
    splitting: true,
    external: ['better-sqlite3', 'pg-native'],
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
    platform: 'node',
    format: 'esm',
    target: 'node24',
    sourcemap: 'linked',
    minifyWhitespace: true,
    logLevel: 'warning',
    metafile: true,
    plugins: [zodEnglishOnly, promClientOtelOnUse],
  });
  // Chunks are named by their content: remove an earlier build's, which would pile up at every start
  // (the compile cache's folder stays: the same chunk finds its cached code again).
  const written = new Set(Object.keys(metafile.outputs).map((path) => resolve(ROOT, path)));
  for (const name of readdirSync(outdir)) {
    const path = join(outdir, name);
    if (/\.js(\.map)?$/.test(name) && !written.has(path)) rmSync(path);
  }
  // Made here, so that an image can hand it to the user the server runs as (docs/multi-process.md).
  mkdirSync(join(outdir, 'compile-cache'), { recursive: true });
}

if (import.meta.main) await bundleServer();
