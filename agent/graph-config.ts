import { readFileSync } from 'node:fs';

export type GraphConfig = { language: 'javascript' | 'python'; graphs: string[] };

/**
 * Reads a `langgraph.json`: which graphs it declares and in which language they are written (a
 * graph path to a `.py` file, or a `python_version` key, means Python).
 */
export function readGraphConfig(path: string): GraphConfig {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new Error(`The graph config ${path} could not be read as JSON: ${(error as Error).message}`);
  }
  const config = parsed as { graphs?: Record<string, unknown>; python_version?: unknown; node_version?: unknown };
  const graphs = config.graphs && typeof config.graphs === 'object' ? Object.entries(config.graphs) : [];
  if (graphs.length === 0) throw new Error(`The graph config ${path} declares no graphs ("graphs": {"name": "./file.ts:graph"}).`);
  const paths = graphs.map(([, value]) => (typeof value === 'string' ? value : typeof value === 'object' && value && 'path' in value ? String((value as { path: unknown }).path) : ''));
  const python = config.node_version === undefined && (config.python_version !== undefined || paths.some((p) => /\.py(:|$)/.test(p)));
  return { language: python ? 'python' : 'javascript', graphs: graphs.map(([name]) => name) };
}
