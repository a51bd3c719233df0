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

registerHooks({
  resolve(specifier, context, nextResolve) {
    // The package's own exception: @tailwindcss/node's ESM cache loader is a file URL already.
    if (specifier.includes('@tailwindcss/node/dist/esm-cache.loader') && specifier.startsWith('file://'))
      return { shortCircuit: true, url: specifier.replace('.mts', '.mjs'), format: 'module' };
    if (specifier === '@langchain/langgraph-checkpoint') {
      langgraphURL ??= nextResolve('@langchain/langgraph', { ...context, parentURL }).url;
      return nextResolve(specifier, { ...context, parentURL: langgraphURL });
    }
    if (FROM_THE_GRAPH.some((pattern) => pattern.test(specifier))) {
      // As the package's hook does: resolved from the graph (failing as it fails when the graph
      // has none), the first `@langchain/langgraph` kept for the checkpoint; then resolved as asked.
      const resolved = nextResolve(specifier, { ...context, parentURL });
      if (specifier === '@langchain/langgraph') langgraphURL ??= resolved.url;
    }
    return nextResolve(specifier, context);
  },
});

// With NODE_COMPILE_CACHE set (the deployment's own cache folder), what was compiled is written
// there at exit; a server replaced by the next revision may be killed before it exits cleanly, so
// it is written once the start is over too (later writes only add what was compiled since).
for (const afterMs of [5_000, 30_000]) setTimeout(() => flushCompileCache(), afterMs).unref();
