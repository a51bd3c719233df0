import { existsSync } from 'node:fs';
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
};

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
  if (own) {
    const seen = (path: string) => modules + path.slice(modulesOnHost.length);
    apiDir = seen(own);
    const tsx = tsxFor(own, modulesOnHost);
    tsxDir = tsx ? seen(tsx) : null;
  } else if (paths.agentModules && apiPackageIn(paths.agentModules.host)) {
    const hostApi = apiPackageIn(paths.agentModules.host)!;
    const hostTsx = tsxFor(hostApi, paths.agentModules.host);
    const seen = (path: string) => paths.agentModules!.seen + path.slice(paths.agentModules!.host.length);
    apiDir = seen(hostApi);
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
  const imports = [
    ...(typescript && tsxDir ? [`--import ${quote(`file://${tsxDir}/dist/loader.mjs`)}`] : []),
    `--import ${quote(`file://${apiDir}/dist/preload.mjs`)}`,
  ];
  // The entry point's first argument is the pid of a `dev` CLI to report to: 0 names none.
  return `exec ${quote(paths.node)} ${imports.join(' ')} ${quote(`${apiDir}/dist/cli/entrypoint.mjs`)} 0 ${quote(payload)}`;
}
