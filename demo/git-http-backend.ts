import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Answers one git-over-HTTP request with the system's `git http-backend` (real git, as CGI): the
 * request body goes to its stdin, its CGI headers become the answer's status and headers.
 * `pathInfo` is the repository path under `projectRoot` plus git's own suffix
 * (`/acme/agent.git/info/refs`). Shared by the demo's git server and the GitHub stand-in of the tests.
 */
export function gitHttpBackend(
  req: IncomingMessage,
  res: ServerResponse,
  options: { projectRoot: string; pathInfo: string; query: string; remoteUser?: string },
): void {
  const cgi = spawn('git', ['http-backend'], {
    env: {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: options.projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: options.pathInfo,
      QUERY_STRING: options.query,
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      ...(options.remoteUser ? { REMOTE_USER: options.remoteUser } : {}),
      REMOTE_ADDR: '127.0.0.1',
      GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      HTTP_CONTENT_ENCODING: String(req.headers['content-encoding'] ?? ''),
    },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  req.pipe(cgi.stdin);
  cgi.stdin.on('error', () => {});
  let head = Buffer.alloc(0);
  let headersDone = false;
  cgi.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) return void res.write(chunk);
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    headersDone = true;
    const headers: Record<string, string> = {};
    let status = 200;
    for (const line of head.subarray(0, end).toString().split('\r\n')) {
      const [name, ...rest] = line.split(':');
      const value = rest.join(':').trim();
      if (name!.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
      else headers[name!] = value;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(end + 4));
  });
  cgi.on('close', () => {
    if (!headersDone) res.writeHead(500).end('git http-backend answered nothing');
    else res.end();
  });
}

/**
 * A read-only git server over HTTP for every repository under `projectRoot` (clone and fetch;
 * `git http-backend` refuses pushes from an unauthenticated user). Listens on `host:port` (0: the
 * OS chooses) and answers the port.
 */
export async function startGitServer(projectRoot: string, host: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://git.invalid');
    gitHttpBackend(req, res, { projectRoot, pathInfo: decodeURIComponent(url.pathname), query: url.search.slice(1) });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}
