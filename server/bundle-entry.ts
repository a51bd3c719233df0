import module from 'node:module';
import { fileURLToPath } from 'node:url';

// The bundle's entry (server/build.ts): Node's compile cache beside the bundle, then the server.
// Compiling the bundle's code was a third of the start; with the cache, a start after the first
// reads V8's code from compile-cache/ instead. Node keys each entry by the file's path and checks it
// against a hash of the file's content, so a changed chunk is compiled anew, never served stale.
// Turned on here, before the server's chunk is imported: a module compiled earlier is not cached.
// Beside the bundle rather than Node's default in the temp directory: V8 runs what it reads there,
// so the folder must be as much the server's own as its code is (a shared /tmp is not), and it
// lives as long as the bundle it caches. The operator decides with Node's own variables, which this
// call leaves alone: NODE_COMPILE_CACHE=<folder> (Node turns it on there first: this call then
// answers ALREADY_ENABLED), NODE_DISABLE_COMPILE_CACHE=1 (answers DISABLED). A folder that cannot be
// made or written only means no cache (Node answers FAILED, it does not throw); a Node without the
// function (before 22.1) starts without one.
module.enableCompileCache?.(fileURLToPath(new URL('compile-cache/', import.meta.url)));
await import('./main.ts');
