// Node's built-ins through `process.getBuiltinModule`, not `import`: this module is in the bundle's
// entry, which esbuild does not give the rewrite that keeps an ESM import of `node:fs` from loading
// readline (server/build.ts, builtinsThroughRequire).
const { fstatSync, readSync } = process.getBuiltinModule('node:fs');
const { join } = process.getBuiltinModule('node:path');

/**
 * The server script's V8 code cache (server/bundle-entry.ts): one file per script, named by the
 * hash of the script's content computed when it was built (`scriptHash`, so a start does not hash
 * two megabytes) and by Node's version, in the folder Node's own compile cache would use
 * (`NODE_COMPILE_CACHE`, else the bundle's `compile-cache/`). `null`: the operator turned caching
 * off (`NODE_DISABLE_COMPILE_CACHE`, as for Node's cache).
 *
 * The file holds a copy of the script it was made for, before V8's data: V8 itself checks only the
 * source's length (and its own version and flags), so the entry compares the whole script with the
 * copy (a memcmp) before handing V8 the data. A script changed after its build (by hand, or a build
 * interrupted) is never run with another's code, whatever the name says.
 */
export function codeCacheFile(scriptHash: string, bundleFolder: string, env: NodeJS.ProcessEnv): string | null {
  if (env.NODE_DISABLE_COMPILE_CACHE) return null;
  return join(env.NODE_COMPILE_CACHE || join(bundleFolder, 'compile-cache'), `${codeCacheStem(scriptHash)}-${process.version}-${process.arch}.v8`);
}

/** The part of a cache file's name that names the script (server/build.ts keeps only the current one's). */
export function codeCacheStem(scriptHash: string): string {
  return `server-${scriptHash}`;
}

/** Whether `name` is a file `codeCacheFile` names (a folder shared with other caches holds others too), or one being written (`.<pid>`). */
export function isCodeCacheFile(name: string): boolean {
  return /^server-[0-9a-f]+-.+\.v8(\.\d+)?$/.test(name);
}

/** The cache file's content: the script's length (4 bytes), the script, V8's data. */
export function cacheFileContent(script: Buffer, v8Data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32LE(script.length);
  return Buffer.concat([length, script, v8Data]);
}

/** How much of a cache file's copy of the script is read at a time, to be compared with the script. */
const COMPARED_AT_ONCE = 256 * 1024;

/**
 * V8's data in the cache file open as `fd`, if the file was made for this very script (else
 * undefined). The file's copy of the script is read a part at a time into one buffer and compared
 * with the script; only V8's data is read whole. Reading the whole file (3.5 MB) made a start touch
 * 2 MB of fresh memory more, ~500 page faults, for a copy that is only compared
 * (docs/decisions/server-start.md, seventh round).
 */
export function v8DataIn(fd: number, script: Buffer): Buffer | undefined {
  const end = 4 + script.length;
  const size = fstatSync(fd).size;
  if (size <= end) return undefined;
  const part = Buffer.allocUnsafe(Math.max(4, Math.min(COMPARED_AT_ONCE, script.length)));
  if (!readAt(fd, part, 4, 0) || part.readUInt32LE(0) !== script.length) return undefined;
  for (let at = 0; at < script.length; at += part.length) {
    const length = Math.min(part.length, script.length - at);
    if (!readAt(fd, part, length, 4 + at) || !part.subarray(0, length).equals(script.subarray(at, at + length))) return undefined;
  }
  const v8Data = Buffer.allocUnsafe(size - end);
  return readAt(fd, v8Data, v8Data.length, end) ? v8Data : undefined;
}

/** Reads `length` bytes of `fd` at `position` into the start of `into`; false if the file ends first. */
function readAt(fd: number, into: Buffer, length: number, position: number): boolean {
  for (let done = 0; done < length; ) {
    const read = readSync(fd, into, done, length - done, position + done);
    if (read === 0) return false;
    done += read;
  }
  return true;
}
