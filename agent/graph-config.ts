import { closeSync, constants, fstatSync, openSync, readFileSync, realpathSync } from 'node:fs';
import { isAbsolute, relative, resolve, sep } from 'node:path';

export type GraphConfig = {
  language: 'javascript' | 'python';
  /** The graph names. */
  graphs: string[];
  /** What the agent server is started with: the config's `graphs`, `auth`, `ui`, `ui_config`, `http` and `env`. */
  server: { graphs: Record<string, unknown>; auth?: unknown; ui?: unknown; ui_config?: unknown; http?: unknown; env?: unknown };
};

/** The graph config cannot be used; the message is for the revision's `status_message`. */
export class GraphConfigError extends Error {
  override readonly name = 'GraphConfigError';
}

/**
 * Reads a `langgraph.json`: which graphs it declares and in which language they are written (a
 * graph path to a `.py` file, or a `python_version` key, means Python). The message of a file that
 * is not JSON names the file and the position only, never its content.
 */
export function readGraphConfig(path: string): GraphConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new GraphConfigError(`The graph config ${path} could not be read: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}`);
  }
  return parseGraphConfig(text, path);
}

/**
 * Reads the graph config at `relativePath` of the checkout `root` without following any link out
 * of it: the path is resolved as the kernel resolves it (every link along it) and must stay inside
 * the checkout, and the file opened is the one checked (no link in its last component, and the same
 * inode as the resolved path), so a link swapped in between the check and the read is refused too.
 */
export function readGraphConfigInside(root: string, relativePath: string): GraphConfig {
  const realRoot = realpathSync(root);
  const shown = relativePath;
  let real: string;
  try {
    real = realpathSync(resolve(realRoot, relativePath));
  } catch {
    throw new GraphConfigError(`The graph config ${shown} is not in the checkout.`);
  }
  const rel = relative(realRoot, real);
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel))
    throw new GraphConfigError(`The graph config ${shown} leads outside the checkout (through a link); it is not read.`);
  let fd: number;
  try {
    fd = openSync(real, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    throw new GraphConfigError(`The graph config ${shown} could not be opened inside the checkout.`);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new GraphConfigError(`The graph config ${shown} is not a regular file.`);
    if (stat.size > 1024 * 1024) throw new GraphConfigError(`The graph config ${shown} is larger than 1 MiB.`);
    return parseGraphConfig(readFileSync(fd, 'utf8'), shown);
  } finally {
    closeSync(fd);
  }
}

function parseGraphConfig(text: string, shown: string): GraphConfig {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    // The parser's message may quote the text itself: only where it failed is said.
    const at = /position (\d+)/.exec((error as Error).message)?.[1];
    throw new GraphConfigError(`The graph config ${shown} could not be read as JSON${at ? ` (at position ${at})` : ''}.`);
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new GraphConfigError(`The graph config ${shown} is not a JSON object.`);
  const config = parsed as {
    graphs?: Record<string, unknown>;
    python_version?: unknown;
    node_version?: unknown;
    auth?: unknown;
    ui?: unknown;
    ui_config?: unknown;
    http?: unknown;
    env?: unknown;
  };
  const graphs = config.graphs && typeof config.graphs === 'object' ? Object.entries(config.graphs) : [];
  if (graphs.length === 0) throw new GraphConfigError(`The graph config ${shown} declares no graphs ("graphs": {"name": "./file.ts:graph"}).`);
  const paths = graphs.map(([, value]) => graphPathOf(value));
  const python = config.node_version === undefined && (config.python_version !== undefined || paths.some((p) => /\.py(:|$)/.test(p)));
  return {
    language: python ? 'python' : 'javascript',
    graphs: graphs.map(([name]) => name),
    server: {
      graphs: config.graphs as Record<string, unknown>,
      auth: config.auth,
      ui: config.ui,
      ui_config: config.ui_config,
      http: config.http,
      env: config.env,
    },
  };
}

/** The file part of a graph's definition (`./src/graph.ts:graph` or `{"path": …}`). */
export function graphPathOf(value: unknown): string {
  return typeof value === 'string' ? value : typeof value === 'object' && value && 'path' in value ? String((value as { path: unknown }).path) : '';
}
