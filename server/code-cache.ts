// Node's built-ins through `process.getBuiltinModule`, not `import`: this module is in the bundle's
// entry, which esbuild does not give the rewrite that keeps an ESM import of `node:fs` from loading
// readline (server/build.ts, builtinsThroughRequire).
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

/** The cache file's content: the script's length (4 bytes), the script, V8's data. */
export function cacheFileContent(script: Buffer, v8Data: Buffer): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32LE(script.length);
  return Buffer.concat([length, script, v8Data]);
}

/** V8's data in a cache file, if the file was made for this very script (else undefined). */
export function v8DataFor(script: Buffer, file: Buffer): Buffer | undefined {
  if (file.length < 4 || file.readUInt32LE(0) !== script.length) return undefined;
  const end = 4 + script.length;
  return file.length > end && script.equals(file.subarray(4, end)) ? file.subarray(end) : undefined;
}
