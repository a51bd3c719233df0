import type { Script } from 'node:vm';
import { cacheFileContent, codeCacheFile, v8DataIn } from './code-cache.ts';
import { mapScriptStacks } from './script-stack.ts';

// Built-ins through `process.getBuiltinModule`: an ESM `import` of `node:fs` reads every export, and
// its `promises` getter loads readline (server/build.ts, builtinsThroughRequire).
const { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } = process.getBuiltinModule('node:fs');
const { createRequire } = process.getBuiltinModule('node:module');
const { dirname } = process.getBuiltinModule('node:path');
const { fileURLToPath } = process.getBuiltinModule('node:url');
const { debuglog } = process.getBuiltinModule('node:util');
const vm = process.getBuiltinModule('node:vm');

/** The hash of server.js's content, written here by the build (server/build.ts), which names its cache file. */
declare const SERVER_SCRIPT_HASH: string;

// The bundle's entry (server/build.ts): runs the server's script (server.js beside it) with a V8 code
// cache made after the start. Node's own compile cache makes a module's entry right after compiling
// it, before it runs, so it holds only the top level: every function the start calls was compiled
// again at every start (docs/decisions/server-start.md, sixth round). A `vm.Script`'s
// `createCachedData()` called once the server has started (and answered its first requests) holds
// those functions' bytecode too: a start that reads it compiles almost nothing.
//
// Safety, as the fifth round decided for Node's cache: the file is in the bundle's own folder (or
// the operator's NODE_COMPILE_CACHE; NODE_DISABLE_COMPILE_CACHE turns it off), checked against the
// whole script before use (server/code-cache.ts: a changed script never runs another's code),
// written 0600 through a rename (a start never reads half a file; concurrent starts each write a
// whole one); a folder that cannot be written means no cache, never an error. V8 rejects data made
// by another V8 or with other flags, or damaged (its checksum): the script is then compiled and the
// file written anew. NODE_DEBUG=code-cache says what happened.
const trace = debuglog('code-cache');
const scriptUrl = new URL('server.js', import.meta.url);
const scriptPath = fileURLToPath(scriptUrl);
const cacheFile = codeCacheFile(SERVER_SCRIPT_HASH, dirname(scriptPath), process.env);
// The script's bytes are kept only until the cache is written (the file holds a copy of exactly
// what was compiled), and V8's data only until it is compiled: 2 and 1.5 MB that a started server
// has no use for.
let scriptBytes: Buffer | undefined = readFileSync(scriptPath);
const script = compile(scriptBytes);

function compile(bytes: Buffer): Script {
  let cachedData: Buffer | undefined;
  if (cacheFile) {
    let fd: number | undefined;
    try {
      fd = openSync(cacheFile, 'r');
      cachedData = v8DataIn(fd, bytes);
    } catch {
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
  // Decoded as Latin-1, a copy byte for byte: the build refuses a script that is not ASCII (server/build.ts).
  const compiled = new vm.Script(bytes.toString('latin1'), { filename: scriptPath, cachedData });
  const use = cachedData === undefined ? 'none' : compiled.cachedDataRejected ? 'rejected' : 'accepted';
  if (cacheFile) trace('%s: %s', cacheFile, use);
  if (!cacheFile || use === 'accepted') scriptBytes = undefined;
  return compiled;
}

function writeCache(): void {
  if (!cacheFile || !scriptBytes) return;
  const bytes = scriptBytes;
  scriptBytes = undefined;
  const partial = `${cacheFile}.${process.pid}`;
  let fd: number | undefined;
  try {
    // The file opened first: a folder that cannot be written costs no serialising (a tenth of a
    // second of CPU, and memory the process keeps).
    mkdirSync(dirname(cacheFile), { recursive: true, mode: 0o700 });
    fd = openSync(partial, 'w', 0o600);
    const content = cacheFileContent(bytes, script.createCachedData());
    writeFileSync(fd, content);
    closeSync(fd);
    fd = undefined;
    renameSync(partial, cacheFile);
    trace('%s: written, %d bytes', cacheFile, content.length);
  } catch (error) {
    trace('%s: not written: %s', cacheFile, (error as Error).message);
    if (fd === undefined) return;
    try {
      closeSync(fd);
      rmSync(partial, { force: true });
    } catch {}
  }
}
mapScriptStacks(scriptPath);
const run = script.runInThisContext() as (require: NodeJS.Require, scriptUrl: string) => Promise<void>;
await run(createRequire(scriptPath), scriptUrl.href);
// Made once the start has succeeded: a second after it (its first requests answered by then, on a
// start that is probed: their functions are in the cache too), or at exit if the process stops
// before that. Not for a start that failed (a configuration refused): its cache would hold little
// more than the configuration's parsing, and the next starts would read it and never make another.
if (scriptBytes) {
  process.on('exit', writeCache);
  setTimeout(writeCache, 1000).unref();
}
