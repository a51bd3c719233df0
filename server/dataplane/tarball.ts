import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { commonJsExports } from '../../shared/commonjs-exports.ts';

/** What the sandbox found in an uploaded source tarball. */
export type TarballSummary = {
  files: number;
  /** The graph config file, when the tarball has it: its path and the graph names it declares. */
  graphConfig: { path: string; graphs: string[] } | null;
};

/** A decompressed tarball bigger than this is refused (a gzip bomb would otherwise cost minutes of CPU). */
const MAX_UNPACKED_BYTES = 2 * 1024 ** 3;
const MAX_CONFIG_BYTES = 1024 * 1024;

/** `./a/b` and `a/b` name the same entry. */
function normalize(path: string): string {
  return path.replace(/^(\.\/)+/, '').replace(/^\/+/, '');
}

/**
 * Reads a gzip tarball entry by entry (nothing is held whole): counts its files and reads the
 * graph config (`graphConfigPath`, default `langgraph.json`) when it is there. Rejects when the
 * data is not a gzip tarball.
 */
export async function inspectTarball(source: Readable, graphConfigPath: string | null): Promise<TarballSummary> {
  const wanted = normalize(graphConfigPath ?? 'langgraph.json');
  const summary: TarballSummary = { files: 0, graphConfig: null };
  let unpacked = 0;
  // Loaded here, not at start: tar-stream and its streams are needed only once a tarball is uploaded
  // (docs/decisions/server-start.md). A CommonJS package: in the bundle its chunk exports only `default`.
  const { extract } = await import('tar-stream').then(commonJsExports);
  const tar = extract();
  tar.on('entry', (header, stream, next) => {
    if (header.type === 'file' || header.type === 'contiguous-file') summary.files += 1;
    const isConfig = header.type === 'file' && normalize(header.name) === wanted;
    const parts: Buffer[] = [];
    let size = 0;
    stream.on('data', (data: unknown) => {
      const chunk = data as Buffer;
      unpacked += chunk.length;
      if (unpacked > MAX_UNPACKED_BYTES) {
        tar.destroy(new Error(`the tarball unpacks to more than ${MAX_UNPACKED_BYTES} bytes`));
        return;
      }
      if (isConfig && size < MAX_CONFIG_BYTES) parts.push(chunk);
      size += chunk.length;
    });
    stream.on('end', () => {
      if (isConfig) summary.graphConfig = { path: wanted, graphs: graphsOf(Buffer.concat(parts).toString('utf8')) };
      next();
    });
    stream.resume();
  });
  await pipeline(source, createGunzip(), tar);
  return summary;
}

/** The graph names of a langgraph.json (`{"graphs": {"agent": "./agent.py:graph"}}`); [] when unreadable. */
function graphsOf(text: string): string[] {
  try {
    const json: unknown = JSON.parse(text);
    if (json && typeof json === 'object' && 'graphs' in json && json.graphs && typeof json.graphs === 'object') return Object.keys(json.graphs);
  } catch {
    // not JSON: the build log says no graphs were found
  }
  return [];
}
