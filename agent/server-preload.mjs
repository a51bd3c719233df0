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
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
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

// The resolutions of the packages' own imports, kept across starts (docs/decisions/
// push-to-serving-round-2.md, round 3): where the agent binds a lock file's stored packages
// read-only at node_modules, it names a file of the deployment's own (AGENT_RESOLUTIONS_FILE) and
// what those packages are (AGENT_RESOLUTIONS_KEY: the lock file's hash, Node's version, the store's
// identity). An import from a file inside node_modules that resolved inside node_modules (or to a
// builtin) depends on those packages alone: every folder Node looked in, from the importing file
// up to node_modules, is inside them. Imports from the checkout (a graph's own files, which change
// with every push) are never kept. Paths are kept relative to the server's folder, which is
// another checkout at every revision.
const cwdURL = pathToFileURL(options.cwd).href.replace(/\/?$/, '/');
const MODULES = 'node_modules/';
const memo = { file: process.env.AGENT_RESOLUTIONS_FILE, key: process.env.AGENT_RESOLUTIONS_KEY, added: 0 };

/** The kept form of a resolution, or null when it is not one to keep. */
function keptForm(specifier, folder, rest, answer) {
  // Node's own answer is { url, format, importAttributes: undefined }: anything more (a hook's) is not ours to keep.
  const plain = Object.entries(answer).every(([name, value]) => name === 'url' || name === 'format' || value === undefined);
  if (!plain || !folder?.startsWith(cwdURL + MODULES)) return null;
  const url = answer.url.startsWith(cwdURL + MODULES) ? answer.url.slice(cwdURL.length) : answer.url.startsWith('node:') ? answer.url : null;
  return url === null ? null : [specifier, folder.slice(cwdURL.length), rest, url, answer.format ?? null];
}

if (memo.file && memo.key) {
  try {
    const kept = JSON.parse(readFileSync(memo.file, 'utf8'));
    if (kept?.key === memo.key && Array.isArray(kept.entries))
      for (const entry of kept.entries) {
        const [specifier, folder, rest, url, format] = Array.isArray(entry) ? entry : [];
        if (![specifier, folder, rest, url].every((part) => typeof part === 'string') || !folder.startsWith(MODULES)) continue;
        if (!url.startsWith(MODULES) && !url.startsWith('node:')) continue;
        const answer = { url: url.startsWith(MODULES) ? cwdURL + url : url };
        if (typeof format === 'string') answer.format = format;
        resolved.set(`${specifier}\0${cwdURL}${folder}\0${rest}`, answer);
      }
  } catch {
    // None kept yet (the first start with these packages), or not readable: resolved as they come.
  }
}

/** Writes what this start resolved to the deployment's file, when it learnt something new (renamed into place: another start may read it). */
function keepResolutions() {
  if (!memo.file || !memo.key || memo.added === 0) return;
  const entries = [];
  for (const [key, answer] of resolved) {
    const [specifier, folder, ...rest] = key.split('\0');
    const kept = keptForm(specifier, folder, rest.join('\0'), answer);
    if (kept) entries.push(kept);
  }
  try {
    // Not the pid for the name: every sandbox has its own pid namespace, so two servers may share one.
    const next = `${memo.file}.${Math.random().toString(36).slice(2)}`;
    writeFileSync(next, JSON.stringify({ key: memo.key, entries }));
    renameSync(next, memo.file);
    memo.added = 0;
  } catch {
    // Not writable (the folder is gone: the deployment is being removed): the next start resolves anew.
  }
}

function resolveOnce(specifier, context, nextResolve) {
  const parent = context.parentURL;
  const folder = parent?.startsWith('file:') ? parent.slice(0, parent.lastIndexOf('/') + 1) : parent;
  const attributes = context.importAttributes;
  const rest = `${context.conditions?.join(',')}\0${attributes && Object.keys(attributes).length > 0 ? JSON.stringify(attributes) : ''}`;
  const key = `${specifier}\0${folder}\0${rest}`;
  let answer = resolved.get(key);
  if (answer === undefined) {
    answer = nextResolve(specifier, context);
    resolved.set(key, answer);
    if (memo.file && keptForm(specifier, folder, rest, answer)) memo.added += 1;
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
// it is written once the start is over too (later writes only add what was compiled since), and
// the resolutions with it.
for (const afterMs of [5_000, 30_000])
  setTimeout(() => {
    flushCompileCache();
    keepResolutions();
  }, afterMs).unref();
// And at exit (a clean stop, or a short-lived start), where Node writes its compile cache too.
process.on('exit', keepResolutions);
