// Loaded with --import before the LangGraph.js API server's entry point, in place of that
// package's own preload (server-command.ts says when: only for the versions whose preload and
// resolve hook are known, by their content). Plain JavaScript: the sandbox's Node runs it with
// nothing of the agent's loaders (docs/decisions/local-agent-server-start.md).
//
// The package's preload registers its resolve hook with module.register, which runs it on a
// hooks thread: every import of the server's few thousand modules is then a synchronous round
// trip to that thread, most of a cold start. The same hook registered with module.registerHooks
// runs in the server's own thread. What it does is the package's hook (graph/load.hooks.mjs), step
// for step: `@langchain/langgraph-checkpoint` resolves from the `@langchain/langgraph` of the
// graph's first file.
import { flushCompileCache, registerHooks } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// The entry point's last argument is its payload: the server's definition, with the graphs.
const options = JSON.parse(process.argv.at(-1) || '{}');
const firstGraphFile =
  Object.values(options.graphs ?? {})
    .map((graph) => (typeof graph === 'string' ? graph : graph?.path)?.split(':').at(0))
    .find(Boolean) ?? 'index.mts';
const parentURL = pathToFileURL(join(options.cwd, firstGraphFile)).toString();
const FROM_THE_GRAPH = [/^@langchain\/langgraph(\/.+)?$/, /^@langchain\/langgraph-checkpoint(\/.+)?$/];
let langgraphURL;

// What each import resolved to, by its specifier, the directory it was imported from and the
// conditions: Node resolves every (importing file, specifier) pair anew, reading and parsing the
// package.json on its way each time (a package's exports map is parsed again at every lookup), and
// the server's few thousand modules import the same packages from the same folders over and over.
// The answer of a resolution depends on nothing else (a relative path on the folder, a package on
// the node_modules above that folder and its package scope), and the files do not change while
// the server runs (its node_modules are read-only, its checkout is the revision's).
const resolved = new Map();

function resolveOnce(specifier, context, nextResolve) {
  const parent = context.parentURL;
  const folder = parent?.startsWith('file:') ? parent.slice(0, parent.lastIndexOf('/') + 1) : parent;
  const attributes = context.importAttributes;
  const key = `${specifier}\0${folder}\0${context.conditions?.join(',')}\0${attributes && Object.keys(attributes).length > 0 ? JSON.stringify(attributes) : ''}`;
  let answer = resolved.get(key);
  if (answer === undefined) {
    answer = nextResolve(specifier, context);
    resolved.set(key, answer);
  }
  // A copy (what the loader does with an answer is no business of the next import's), which says
  // that the resolution ended here on purpose when it comes from the map.
  return { ...answer, shortCircuit: true };
}

registerHooks({
  resolve(specifier, context, nextResolve) {
    // The package's own exception: @tailwindcss/node's ESM cache loader is a file URL already.
    if (specifier.includes('@tailwindcss/node/dist/esm-cache.loader') && specifier.startsWith('file://'))
      return { shortCircuit: true, url: specifier.replace('.mts', '.mjs'), format: 'module' };
    if (specifier === '@langchain/langgraph-checkpoint') {
      langgraphURL ??= resolveOnce('@langchain/langgraph', { ...context, parentURL }, nextResolve).url;
      return resolveOnce(specifier, { ...context, parentURL: langgraphURL }, nextResolve);
    }
    if (FROM_THE_GRAPH.some((pattern) => pattern.test(specifier))) {
      // As the package's hook does: resolved from the graph (failing as it fails when the graph
      // has none), the first `@langchain/langgraph` kept for the checkpoint; then resolved as asked.
      const fromGraph = resolveOnce(specifier, { ...context, parentURL }, nextResolve);
      if (specifier === '@langchain/langgraph') langgraphURL ??= fromGraph.url;
    }
    return resolveOnce(specifier, context, nextResolve);
  },
});

// With NODE_COMPILE_CACHE set (the deployment's own cache folder), what was compiled is written
// there at exit; a server replaced by the next revision may be killed before it exits cleanly, so
// it is written once the start is over too (later writes only add what was compiled since).
for (const afterMs of [5_000, 30_000]) setTimeout(() => flushCompileCache(), afterMs).unref();
