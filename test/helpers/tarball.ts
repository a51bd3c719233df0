import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';

/** A real gzip tarball of `files` (path → content), built in memory, as `langgraph deploy` uploads one. */
export async function gzipTarball(files: Record<string, string | Buffer>): Promise<Buffer> {
  const tar = pack();
  const parts: Buffer[] = [];
  tar.on('data', (chunk: unknown) => parts.push(chunk as Buffer));
  const ended = new Promise<void>((resolve, reject) => {
    tar.on('end', () => resolve());
    tar.on('error', reject);
  });
  for (const [name, content] of Object.entries(files)) {
    await new Promise<void>((resolve, reject) => tar.entry({ name }, content, (error) => (error ? reject(error) : resolve())));
  }
  tar.finalize();
  await ended;
  return gzipSync(Buffer.concat(parts));
}

/** A small agent project: langgraph.json naming one graph, its code, and a requirements file. */
export function agentProject(graphs: Record<string, string> = { agent: './agent.py:graph' }): Record<string, string> {
  return {
    'langgraph.json': JSON.stringify({ dependencies: ['.'], graphs }),
    'agent.py': 'graph = None  # a stand-in graph module\n',
    'requirements.txt': 'langgraph\n',
  };
}
