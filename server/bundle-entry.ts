import module from 'node:module';
import { fileURLToPath } from 'node:url';

// The bundle's entry (server/build.ts): Node's compile cache beside the bundle, then the server.
// Compiling the bundle's code was a third of the start; with the cache, a start after the first
// reads V8's code from compile-cache/ instead (Node checks it against the code it was made from).
// Turned on here, before the server's chunk is imported: a module compiled earlier is not cached.
// A folder that cannot be written only means no cache (Node answers a status, it does not throw);
// a Node without the function (before 22.1) starts without one.
module.enableCompileCache?.(fileURLToPath(new URL('compile-cache/', import.meta.url)));
await import('./main.ts');
