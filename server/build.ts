import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { build, type Plugin } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '..');

/** Where `npm start` runs the server from (not committed: built at every start). */
export const SERVER_BUNDLE = resolve(ROOT, 'server/dist/main.js');

/**
 * A plugin that rewrites one file of a package at bundle time, each text replaced once. A text no
 * longer found fails the build (the package changed): better than quietly loading again what the
 * rewrite defers.
 */
function rewrite(name: string, file: RegExp, replacements: ReadonlyArray<readonly [from: string, to: string]>): Plugin {
  return {
    name,
    setup(build) {
      build.onLoad({ filter: file }, (args) => {
        let source = readFileSync(args.path, 'utf8');
        for (const [from, to] of replacements) {
          if (!source.includes(from)) throw new Error(`${args.path}: no longer has ${JSON.stringify(from)}; update server/build.ts (${name})`);
          source = source.replace(from, () => to);
        }
        return { contents: source, loader: 'js' };
      });
    },
  };
}

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
const promClientOtelOnUse = rewrite('prom-client-otel-on-use', /[\\/]prom-client[\\/]lib[\\/]metrics[\\/]processCpuTotal\.js$/, [
  [
    "const OtelApi = require('@opentelemetry/api');",
    "let otelApi; const OtelApi = { get trace() { return (otelApi ??= require('@opentelemetry/api')).trace; }, get context() { return (otelApi ??= require('@opentelemetry/api')).context; } };",
  ],
]);

/**
 * Requires of pino and prom-client made on first use, for what the server never uses: pino's
 * transports (thread-stream, and worker_threads, which pino reads `isMainThread` from only for an
 * asynchronous destination; the server's is synchronous, server/logger.ts) and prom-client's
 * Pushgateway (https, zlib).
 */
const pinoTransportsOnUse = rewrite('pino-transports-on-use', /[\\/]pino[\\/]lib[\\/]tools\.js$/, [
  [
    "const { isMainThread } = require('worker_threads')",
    "let workerThreads\nconst isMainThread = () => (workerThreads ??= require('worker_threads')).isMainThread",
  ],
  ['if (!opts.sync && isMainThread) {', 'if (!opts.sync && isMainThread()) {'],
  ["const transport = require('./transport')", "const transport = (options) => require('./transport')(options)"],
]);
const pinoExportsOnUse = rewrite('pino-exports-on-use', /[\\/]pino[\\/]pino\.js$/, [
  [
    "module.exports.transport = require('./lib/transport')",
    "Object.defineProperty(module.exports, 'transport', { enumerable: true, get: () => require('./lib/transport') })",
  ],
]);
const promClientPushgatewayOnUse = rewrite('prom-client-pushgateway-on-use', /[\\/]prom-client[\\/]index\.js$/, [
  [
    "exports.Pushgateway = require('./lib/pushgateway');",
    "Object.defineProperty(exports, 'Pushgateway', { enumerable: true, get: () => require('./lib/pushgateway') });",
  ],
]);

/**
 * An ESM `import` of one of Node's built-in modules reads every export of it, getters included, when
 * the importing module is linked: `node:http`'s `WebSocket` getter loads undici (Node's fetch, some
 * 50 ms of CPU and 15 MB resident at a start), `node:fs`'s `promises` loads Node's readline,
 * `node:crypto`'s `webcrypto` its WebCrypto. `require` reads none of them. So each `import` of a
 * built-in in the bundle becomes a CommonJS module of one line that requires it: esbuild then reads
 * each named import as a property of that module where it is used, not at import.
 */
const builtinsThroughRequire: Plugin = {
  name: 'builtins-through-require',
  setup(build) {
    build.onResolve({ filter: /^[a-z_:/]+$/ }, (args) =>
      args.kind === 'import-statement' && isBuiltin(args.path) ? { path: args.path.replace(/^(node:)?/, 'node:'), namespace: 'builtin-require' } : undefined,
    );
    build.onLoad({ filter: /.*/, namespace: 'builtin-require' }, (args) => {
      const name = JSON.stringify(args.path);
      if (!REQUIRED_ON_USE.has(args.path)) return { contents: `module.exports = require(${name});`, loader: 'js' };
      // Each export a getter (and setter) of the module required at the first one read.
      const exports = Object.getOwnPropertyNames(createRequire(import.meta.url)(args.path)).map(
        (key) =>
          `${JSON.stringify(key)}: { enumerable: true, get: () => load()[${JSON.stringify(key)}], set: (value) => { load()[${JSON.stringify(key)}] = value; } }`,
      );
      return {
        contents: `let loaded; const load = () => (loaded ??= require(${name}));\nmodule.exports = Object.defineProperties({}, {\n${exports.join(',\n')}\n});`,
        loader: 'js',
      };
    });
  },
};

/**
 * Built-ins required when one of their exports is first read rather than when the module that
 * imports them is evaluated: `node:fs/promises` loads Node's readline, `node:https` all of `tls`,
 * `node:zlib` its binding, and nothing before the first answer uses them (git's ls-remote, the
 * OAuth token request, an upload's tarball). Only modules
 * whose exports are functions that need no `this` (no class as the default export, no methods of
 * an object such as `process`): the default import is the stand-in object, not the module.
 */
const REQUIRED_ON_USE = new Set(['node:fs/promises', 'node:https', 'node:zlib']);

/** Where the bundle's `Request` and `Response` come from (see `honoNodeServerOnUse`): esbuild's `inject`. */
const LIGHTWEIGHT_CLASSES = 'lightweight-web-classes';

/**
 * @hono/node-server reads `global.Request` and `global.Response` when it is imported (to extend and
 * chain to them) and again when its listener is made (to replace them with its lightweight classes),
 * and imports `node:http2` (another 30 ms of CPU and 13 MB) for `instanceof` checks: each of these
 * loads undici before the first answer, though a `GET /healthz` needs neither. Its module is
 * rewritten here so that:
 * - its classes are chained to undici's when one is first needed (a `Request` constructed, a
 *   `Response`'s body, one of their statics), not at import;
 * - the globals are left alone: the bundle's own `Request` and `Response` are its lightweight
 *   classes instead (esbuild's `inject`), which is what replacing the globals gave the app's code;
 * - `node:http2` is loaded only for a request that is not Node's `IncomingMessage`.
 * The TypeScript sources (tests, `node server/main.ts`) run the package as it is.
 */
const honoNodeServerClasses: Plugin = {
  name: 'hono-node-server-classes',
  setup(build) {
    build.onResolve({ filter: new RegExp(`^${LIGHTWEIGHT_CLASSES}$`) }, () => ({ path: LIGHTWEIGHT_CLASSES, namespace: LIGHTWEIGHT_CLASSES }));
    build.onLoad({ filter: /.*/, namespace: LIGHTWEIGHT_CLASSES }, () => ({
      contents: "export { LightweightRequest as Request, LightweightResponse as Response } from '@hono/node-server';",
      resolveDir: ROOT,
      loader: 'js',
    }));
  },
};
const honoNodeServerOnUse = rewrite('hono-node-server-on-use', /[\\/]@hono[\\/]node-server[\\/]dist[\\/]index\.mjs$/, [
  [
    'import { Http2ServerRequest as Http2ServerRequest2, constants as h2constants } from "http2";',
    `import { IncomingMessage as NodeIncomingMessage } from "http";
let http2Module;
const http2 = () => (http2Module ??= require("node:http2"));
var Http2ServerRequest2 = { [Symbol.hasInstance]: (value) => !(value instanceof NodeIncomingMessage) && value instanceof http2().Http2ServerRequest };
var h2constants = { get NGHTTP2_NO_ERROR() { return http2().constants.NGHTTP2_NO_ERROR; } };`,
  ],
  ['import { Http2ServerRequest } from "http2";', 'var Http2ServerRequest = Http2ServerRequest2;'],
  [
    'var GlobalRequest = global.Request;\nvar Request = class extends GlobalRequest {\n  constructor(input, options) {\n',
    `var GlobalRequest;
const undiciRequest = () => {
  if (!GlobalRequest) {
    GlobalRequest = globalThis.Request;
    Object.setPrototypeOf(Request, GlobalRequest);
    Object.setPrototypeOf(Request.prototype, GlobalRequest.prototype);
  }
  return GlobalRequest;
};
var Request = class extends Object {
  constructor(input, options) {
    undiciRequest();
`,
  ],
  ['var GlobalResponse = global.Response;', 'var GlobalResponse;'],
  ['this[responseCache] ||= new GlobalResponse(', 'this[responseCache] ||= new (undiciResponse())('],
  [
    'Object.setPrototypeOf(Response2, GlobalResponse);\nObject.setPrototypeOf(Response2.prototype, GlobalResponse.prototype);',
    `const undiciResponse = () => {
  if (!GlobalResponse) {
    GlobalResponse = globalThis.Response;
    Object.setPrototypeOf(Response2, GlobalResponse);
    Object.setPrototypeOf(Response2.prototype, GlobalResponse.prototype);
  }
  return GlobalResponse;
};
Object.setPrototypeOf(Response2, { get json() { return undiciResponse().json; }, get redirect() { return undiciResponse().redirect; }, get error() { return undiciResponse().error; } });`,
  ],
  [
    `  if (options.overrideGlobalObjects !== false && global.Request !== Request) {
    Object.defineProperty(global, "Request", {
      value: Request
    });
    Object.defineProperty(global, "Response", {
      value: Response2
    });
  }
`,
    '',
  ],
  // A plain object of headers (Hono's answers without extra headers) told apart before the
  // `instanceof Headers` that would load undici to ask.
  ['  } else if (header instanceof Headers) {', '  } else if (Object.getPrototypeOf(header) !== Object.prototype && header instanceof Headers) {'],
  ['export {\n  RequestError,', 'export {\n  Request as LightweightRequest,\n  Response2 as LightweightResponse,\n  RequestError,'],
]);

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
    inject: [LIGHTWEIGHT_CLASSES],
    plugins: [
      builtinsThroughRequire,
      honoNodeServerClasses,
      honoNodeServerOnUse,
      zodEnglishOnly,
      promClientOtelOnUse,
      promClientPushgatewayOnUse,
      pinoTransportsOnUse,
      pinoExportsOnUse,
    ],
  });
  // Chunks are named by their content: remove an earlier build's, which would pile up at every start.
  const written = new Set(Object.keys(metafile.outputs).map((path) => resolve(ROOT, path)));
  let changed = false;
  for (const name of readdirSync(outdir)) {
    const path = join(outdir, name);
    if (/\.js(\.map)?$/.test(name) && !written.has(path)) {
      rmSync(path);
      changed = true;
    }
  }
  // The compile cache's entries are keyed by a chunk's path: an unchanged build keeps them all (the
  // same chunk finds its code again), but a removed chunk's entry would stay forever (a megabyte per
  // code change). So a build that changed the code empties the cache (its subfolders: one per Node
  // version), and the next start writes it anew. The folder itself is made here and kept (with its
  // owner), so that an image can hand it to the user the server runs as (docs/multi-process.md).
  const compileCache = join(outdir, 'compile-cache');
  mkdirSync(compileCache, { recursive: true });
  if (changed) for (const name of readdirSync(compileCache)) rmSync(join(compileCache, name), { recursive: true, force: true });
}

if (import.meta.main) await bundleServer();
