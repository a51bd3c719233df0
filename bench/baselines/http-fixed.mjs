// Baseline 1, the floor of the stack: bare node:http answering a fixed JSON body. No routing, no
// parsing, no database. Plain JavaScript, so Node does not load its TypeScript stripper (which
// costs ~17 MB of resident memory and would flatter the server in the idle-memory comparison).
//
// `GET /wait` is the bare long-poll: the request is held (nothing but the socket and a closure
// per waiter) until `POST /release`, which answers every held request with the fixed body. The
// long-poll benchmark compares the server's memory per waiter with this one's.
// Prints `{"msg":"listening","port":N}` on stderr like the real server.
import { createServer } from 'node:http';

const body = JSON.stringify({
  id: '6f1c1b0e-6d0a-4a4e-9a55-2d3a0e0c6a11',
  deployment_id: '0b7e7f58-3a5c-4a8f-8d0b-5f6f3f0e2c21',
  created_at: '2026-11-22T10:00:00.000Z',
  updated_at: '2026-11-22T10:00:03.000Z',
  status: 'DEPLOYED',
  status_message: null,
  source: 'github',
  source_revision_config: { repo_ref: 'main', graph_config_path: 'langgraph.json', image_uri: null, repo_commit_sha: null },
  trigger: 'create',
});

/** @type {Set<import('node:http').ServerResponse>} */
const waiting = new Set();
const answer = (res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

const server = createServer((req, res) => {
  if (req.url === '/wait') {
    waiting.add(res);
    res.on('close', () => waiting.delete(res));
    return;
  }
  if (req.method === 'POST' && req.url === '/release') {
    for (const held of waiting) answer(held);
    waiting.clear();
  }
  answer(res);
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stderr.write(`${JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
