import { hash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { build, type Plugin } from 'esbuild';
import { codeCacheStem } from './code-cache.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** Where `npm start` runs the server from (not committed: built at every start). */
export const SERVER_BUNDLE = resolve(ROOT, 'server/dist/main.js');

/**
 * The server itself, beside the entry: one classic script (server/bundle-entry.ts runs it through
 * `vm.Script`, whose code cache can be made after the start), so no `import`/`export` and no
 * `import.meta`. It is one function of the entry's `require` and the script's own URL, async for
 * main.ts's top-level `await`; strict, as the ESM it was bundled as.
 */
export const SERVER_SCRIPT = 'server';
const SCRIPT_URL = '__scriptUrl';
const SCRIPT_HEAD = `(async function (require, ${SCRIPT_URL}) {"use strict";`;
const SCRIPT_TAIL = '})';

/** The hash of the script's content that names its code cache (server/code-cache.ts), computed here rather than at every start. */
const scriptHash = (script: Buffer) => hash('sha256', script).slice(0, 32);

/** The hash of the server script built in `outdir`. */
export const builtScriptHash = (outdir: string) => scriptHash(readFileSync(join(outdir, `${SERVER_SCRIPT}.js`)));

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
 *
 * And pino's callers: every `pino()` (two at a start: server/logger.ts's silent logger and the
 * server's) took `util.getCallSites()`, the script name of each frame on the stack, which pino reads
 * only to resolve a transport's relative target. Each frame's location makes V8 find its line: for
 * the bundle's 2 MB script that is a scan of the whole script for its line ends, ~15 M
 * instructions of a start (callgrind, docs/decisions/server-start.md, seventh round). The callers
 * are now taken only for a transport, when normalizing its options: one more frame of pino's own on
 * the stack (`slice(2)` then leaves pino's frame first), whose script is the bundle, as every
 * caller's is in the bundle.
 */
const pinoTransportsOnUse = rewrite('pino-transports-on-use', /[\\/]pino[\\/]lib[\\/]tools\.js$/, [
  [
    "const { isMainThread } = require('worker_threads')",
    "let workerThreads\nconst isMainThread = () => (workerThreads ??= require('worker_threads')).isMainThread",
  ],
  ['if (!opts.sync && isMainThread) {', 'if (!opts.sync && isMainThread()) {'],
  ["const transport = require('./transport')", "const transport = (options) => require('./transport')(options)"],
  ['stream = transport({ caller, ...opts.transport', "stream = transport({ caller: caller ?? require('./caller')(), ...opts.transport"],
]);
const pinoExportsOnUse = rewrite('pino-exports-on-use', /[\\/]pino[\\/]pino\.js$/, [
  ['normalize(instance, caller(), ...args)', 'normalize(instance, undefined, ...args)'],
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
 * each named import as a property of that module where it is used, not at import. The same for an
 * `import()` of a built-in (OpenTelemetry's exporter has two) and for better-sqlite3: the server's
 * script is a classic script (`SERVER_SCRIPT`), which can hold neither `import` nor `import()`.
 */
const builtinsThroughRequire: Plugin = {
  name: 'builtins-through-require',
  setup(build) {
    build.onResolve({ filter: /^[a-z0-9_:/-]+$/ }, (args) => {
      // The native addon stays in node_modules: imported through a one-line shim, as a built-in is,
      // whose `require` of it is left for run time.
      if (args.path === NATIVE_ADDON) {
        return args.kind === 'require-call' ? { path: args.path, external: true } : { path: args.path, namespace: 'builtin-require' };
      }
      if (args.kind !== 'import-statement' && args.kind !== 'dynamic-import') return undefined;
      if (isBuiltin(args.path)) return { path: args.path.replace(/^(node:)?/, 'node:'), namespace: 'builtin-require' };
      return undefined;
    });
    build.onLoad({ filter: /.*/, namespace: 'builtin-require' }, (args) => {
      const name = JSON.stringify(args.path);
      // An object that inherits the module's exports rather than the module itself: esbuild's
      // `__toESM` gives each importing file an object of its own with a getter for every own
      // property of what the shim exports, some 90 `defineProperty`s for `node:crypto` (imported by
      // 20 files), 100 for `node:fs`; about a twentieth of a start's instructions beyond the bare
      // server (docs/decisions/server-start.md, seventh round). With none of its own, it copies
      // nothing: every named import is read through the prototype, where it was a getter's call.
      // A module that is a function (better-sqlite3's `Database`, `node:events`…) is exported as is.
      if (!REQUIRED_ON_USE.has(args.path)) {
        return { contents: `const m = require(${name});\nmodule.exports = typeof m === 'function' ? m : Object.create(m);`, loader: 'js' };
      }
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
const NATIVE_ADDON = 'better-sqlite3';
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
 * Bundles the server's TypeScript and its packages into `server/dist/`: `server.js`, the whole
 * server as one classic script (`SERVER_SCRIPT`), and `main.js`, its entry (server/bundle-entry.ts),
 * which runs the script with a V8 code cache made after the start. What the first request does not
 * need (PostgreSQL's driver, OpenTelemetry, tar-stream, the GitHub App's JWTs…) is in the script
 * too, behind esbuild's wrappers of each `import()`: evaluated when first used, and compiled only
 * then (a cached start reads the code of what the start ran, nothing else). It was split into ESM
 * chunks until the sixth round (docs/decisions/server-start.md): a module's code cache cannot be
 * made after it has run, a script's can.
 *
 * Why bundle the packages too: resolving and compiling some 400 files of node_modules was most of
 * the start. Only what cannot be bundled stays in node_modules: better-sqlite3 (a native addon, found
 * by its path) and pg-native (an optional native driver pg asks for only when told to). CommonJS
 * packages `require` Node's built-ins: the script is a function of the entry's `require`. Running
 * the sources directly makes Node load its TypeScript stripper at start, which costs about 35 MB of
 * resident memory for as long as the server runs. `outdir` (server/dist/ by default) must be a
 * folder directly in server/: the console finds its files relative to the script
 * (server/console/assets.ts).
 */
export async function bundleServer(outdir = dirname(SERVER_BUNDLE)): Promise<void> {
  const server = await build({
    absWorkingDir: ROOT,
    entryPoints: { [SERVER_SCRIPT]: 'server/main.ts' },
    outdir,
    bundle: true,
    external: ['pg-native'],
    banner: { js: SCRIPT_HEAD },
    footer: { js: SCRIPT_TAIL },
    define: { 'import.meta.url': SCRIPT_URL },
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
  // ASCII only: the entry reads the script as Latin-1 (a byte a character, no UTF-8 decoding of two
  // megabytes at every start), and V8 keeps it one byte a character for as long as the server runs.
  // esbuild escapes what it can; a tagged template's text it cannot (the console writes HTML entities).
  const script = readFileSync(join(outdir, `${SERVER_SCRIPT}.js`));
  const nonAscii = /[^\x00-\x7f].{0,40}/.exec(script.toString('latin1'));
  if (nonAscii) throw new Error(`server/build.ts: the server script is not ASCII: ${JSON.stringify(nonAscii[0])}`);
  const hashOfScript = scriptHash(script);
  const entry = await build({
    absWorkingDir: ROOT,
    entryPoints: { main: 'server/bundle-entry.ts' },
    outdir,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    sourcemap: 'linked',
    logLevel: 'warning',
    metafile: true,
    // The script's hash, which names its code cache (server/code-cache.ts): computed here, not at every start.
    define: { SERVER_SCRIPT_HASH: JSON.stringify(hashOfScript) },
  });
  const metafile = { outputs: { ...entry.metafile.outputs, ...server.metafile.outputs } };
  // What an earlier build wrote and this one did not (the chunks of the split ESM bundle before the
  // script), removed, as is every cache file but the current script's (server/code-cache.ts: named
  // by the script's content, so an unchanged build keeps its cache, and a changed one's would
  // otherwise pile up, a megabyte and a half per code change). The folder itself is made here and
  // kept (with its owner), so that an image can hand it to the user the server runs as
  // (docs/multi-process.md).
  const written = new Set(Object.keys(metafile.outputs).map((path) => resolve(ROOT, path)));
  for (const name of readdirSync(outdir)) {
    const path = join(outdir, name);
    if (/\.js(\.map)?$/.test(name) && !written.has(path)) rmSync(path);
  }
  const compileCache = join(outdir, 'compile-cache');
  mkdirSync(compileCache, { recursive: true });
  keepOnlyCurrentCodeCache(compileCache, hashOfScript, () => true);
}

/**
 * Removes from `cacheFolder` the entries `isOurs` names that are not the code cache of the script
 * whose hash is `currentHash` (server/code-cache.ts names each file by its script's hash).
 */
export function keepOnlyCurrentCodeCache(cacheFolder: string, currentHash: string, isOurs: (name: string) => boolean): void {
  const current = codeCacheStem(currentHash);
  for (const name of readdirSync(cacheFolder)) {
    if (isOurs(name) && !name.startsWith(`${current}-`)) rmSync(join(cacheFolder, name), { recursive: true, force: true });
  }
}

if (import.meta.main) await bundleServer();
