// Baseline 1, the floor of the stack: bare node:http answering a fixed JSON body. No routing, no
// parsing, no database. Plain JavaScript, so Node does not load its TypeScript stripper (which
// costs ~17 MB of resident memory and would flatter the server in the idle-memory comparison).
//
// `GET /wait` is the bare long-poll: the request is held (nothing but the socket and a closure
// per waiter) until `POST /release`, which answers every held request with the fixed body. The
// long-poll benchmark compares the server's memory per waiter with this one's.
//
// With BASELINE_WAKE_DB (a copy of the server's database, made by the long-poll benchmark), a
// release does the work the server's interrupt does between its change and its waiters' answers,
// and nothing else: `POST /release?revision=<id>` stamps the time, changes that revision in one
// IMMEDIATE transaction with the server's own statements (BASELINE_WAKE_TRANSITION from the
// statuses BASELINE_WAKE_FROM, then the log line BASELINE_WAKE_LOG; synchronous as BASELINE_SYNCHRONOUS, FULL by default), reads the record
// back (BASELINE_WAKE_READ), serializes it once and answers every held request the server's bytes:
// the same body and the same headers, a new request id each (docs/decisions/long-poll-wake-up.md).
// The database module is loaded only then, so the plain baseline stays without it.
// Prints `{"msg":"listening","port":N}` on stderr like the real server.
import { randomUUID } from 'node:crypto';
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

const wake = process.env.BASELINE_WAKE_DB ? await sameWorkRelease(process.env.BASELINE_WAKE_DB) : null;

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
  if (wake && req.method === 'POST' && req.url?.startsWith('/release?revision=')) {
    const text = wake(req.url.slice('/release?revision='.length));
    waiting.clear();
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    return res.end(text);
  }
  answer(res);
});

/**
 * The release that does the server's work for a change (see the top of this file): answers a
 * function that changes the revision, answers every held request with it, and answers its body.
 */
async function sameWorkRelease(path) {
  const { default: Database } = await import('better-sqlite3');
  const { revisionAnswerText } = await import('./api-shapes.mjs');
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma(`synchronous = ${process.env.BASELINE_SYNCHRONOUS ?? 'FULL'}`);
  db.pragma('busy_timeout = 5000');
  db.pragma('foreign_keys = ON');
  const transition = db.prepare(process.env.BASELINE_WAKE_TRANSITION);
  const log = db.prepare(process.env.BASELINE_WAKE_LOG);
  const read = db.prepare(process.env.BASELINE_WAKE_READ);
  const reason = 'Interrupted at the request of an API client.';
  const change = db.transaction((id, now) => {
    transition.run({ id, to: 'INTERRUPTED', status_message: reason, from: process.env.BASELINE_WAKE_FROM, now });
    log.run(id, 'build', 'warn', reason, now);
  });
  return (id) => {
    change.immediate(id, new Date().toISOString());
    const row = read.get(id);
    const text = revisionAnswerText(row);
    const etag = `"${row.id}.${row.version}"`;
    const length = Buffer.byteLength(text);
    for (const held of waiting) {
      held.writeHead(200, { 'x-request-id': randomUUID(), 'content-type': 'application/json', etag, 'cache-control': 'no-cache', 'Content-Length': length });
      held.end(text);
    }
    return text;
  };
}
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stderr.write(`${JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
