import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { quote } from './git.ts';
import { type GraphConfig, graphPathOf } from './graph-config.ts';

/** Where the programs the server command names are, as the command will see them (inside the sandbox, or on the host). */
export type ServerPaths = {
  /** The Node binary to run. */
  node: string;
  /** The agent's own node_modules: on the host (to look in), and as the command sees it. */
  agentModules: { host: string; seen: string } | null;
  /** Where the checkout's `node_modules` really is on the host (stored packages bound there), when not in the checkout. */
  checkoutModules?: string | null;
  /** The agent's server-preload.mjs as the command sees it: loaded instead of the API server's own preload where that is a known one. */
  preload?: string | null;
};

/**
 * The API server's own preload and resolve hook (their sha256, `dist/preload.mjs` then
 * `dist/graph/load.hooks.mjs`) that the agent's server-preload.mjs does the work of, in the
 * server's own thread: @langchain/langgraph-api 2.0.0. Any other pair is loaded as it is.
 */
const KNOWN_PRELOADS = new Set([
  '0c271d506ff8f827c711f81e0fff380e4020620f8179c2be95e1ba02e5217e49 7a092e9a38d47e729bf79292a0949d6da21fe403d54008a6ee693aed52b899b6',
]);

/** Whether the API server package at `apiDir` (on the host) has a preload the agent's stands in for. */
function knownPreload(apiDir: string): boolean {
  try {
    const digest = (file: string) =>
      createHash('sha256')
        .update(readFileSync(join(apiDir, 'dist', file)))
        .digest('hex');
    return KNOWN_PRELOADS.has(`${digest('preload.mjs')} ${digest('graph/load.hooks.mjs')}`);
  } catch {
    return false;
  }
}

/**
 * The LangGraph.js API server's package (`@langchain/langgraph-api`) a checkout installed: beside
 * its LangGraph CLI, or hoisted; answers the directory on the host.
 */
function apiPackageIn(modules: string): string | null {
  for (const candidate of [join(modules, '@langchain/langgraph-cli/node_modules/@langchain/langgraph-api'), join(modules, '@langchain/langgraph-api')]) {
    if (existsSync(join(candidate, 'dist/cli/entrypoint.mjs'))) return candidate;
  }
  return null;
}

/** The `tsx` package the API server's package resolves (its own, or a hoisted one up the tree). */
function tsxFor(apiDir: string, modulesRoot: string): string | null {
  let dir = apiDir;
  while (dir.startsWith(modulesRoot)) {
    const candidate = join(dir, 'node_modules/tsx');
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dir === modulesRoot) break;
    dir = dirname(dir);
  }
  const hoisted = join(modulesRoot, 'tsx');
  return existsSync(join(hoisted, 'package.json')) ? hoisted : null;
}

/**
 * The production command of the LangGraph.js API server for a JavaScript graph config: the API
 * server's own entry point run by Node directly, without the CLI's `dev` (which runs it under
 * `tsx watch` with a file watcher and a reloader: five processes, about twice the memory). `tsx`
 * is loaded only when a graph is TypeScript. Logs are JSON lines (`LOG_JSON`), so the agent stores
 * each line's own level and text. Null when neither the checkout nor the agent has the API server.
 */
export function productionServerCommand(cwd: string, config: GraphConfig, port: number, paths: ServerPaths): string | null {
  const modules = join(cwd, 'node_modules');
  const modulesOnHost = paths.checkoutModules ?? modules;
  const own = apiPackageIn(modulesOnHost);
  let apiDir: string;
  let tsxDir: string | null;
  let apiOnHost: string;
  if (own) {
    const seen = (path: string) => modules + path.slice(modulesOnHost.length);
    apiOnHost = own;
    apiDir = seen(own);
    const tsx = tsxFor(own, modulesOnHost);
    tsxDir = tsx ? seen(tsx) : null;
  } else if (paths.agentModules && apiPackageIn(paths.agentModules.host)) {
    apiOnHost = apiPackageIn(paths.agentModules.host)!;
    const hostTsx = tsxFor(apiOnHost, paths.agentModules.host);
    const seen = (path: string) => paths.agentModules!.seen + path.slice(paths.agentModules!.host.length);
    apiDir = seen(apiOnHost);
    tsxDir = hostTsx ? seen(hostTsx) : null;
  } else {
    return null;
  }
  const graphFiles = Object.values(config.server.graphs).map((value) => graphPathOf(value).split(':')[0] ?? '');
  const typescript = graphFiles.some((file) => /\.(ts|mts|cts|tsx)$/.test(file));
  const payload = JSON.stringify({
    port,
    nWorkers: 10,
    host: '127.0.0.1',
    graphs: config.server.graphs,
    auth: config.server.auth,
    ui: config.server.ui,
    ui_config: config.server.ui_config,
    cwd,
    http: config.server.http,
  });
  // tsx registers hooks of its own on a hooks thread: a TypeScript graph keeps the package's preload beside them.
  const preload = paths.preload && !typescript && knownPreload(apiOnHost) ? paths.preload : `${apiDir}/dist/preload.mjs`;
  const imports = [...(typescript && tsxDir ? [`--import ${quote(`file://${tsxDir}/dist/loader.mjs`)}`] : []), `--import ${quote(`file://${preload}`)}`];
  // The entry point's first argument is the pid of a `dev` CLI to report to: 0 names none.
  return `exec ${quote(paths.node)} ${imports.join(' ')} ${quote(`${apiDir}/dist/cli/entrypoint.mjs`)} 0 ${quote(payload)}`;
}
