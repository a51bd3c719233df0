import Database from 'better-sqlite3';
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import { seedId } from '../lib/baseline-ids.ts';

// Baseline 2: bare node:http + better-sqlite3, the floor for a JSON API on one SQLite file.
// GET /rows/<id> reads one row by primary key and answers it as JSON; POST /rows reads a JSON
// body, inserts one row and answers it. The file uses the same pragmas as the real server (WAL,
// synchronous FULL) so the comparison is like for like. `BASELINE_DB` names the file; it is
// seeded with `BASELINE_ROWS` rows (default 1000) with ids `00000000-0000-4000-8000-<12 digits>`.

const db = new Database(process.env.BASELINE_DB ?? ':memory:');
db.pragma('journal_mode = WAL');
db.pragma(`synchronous = ${process.env.BASELINE_SYNCHRONOUS ?? 'FULL'}`);
db.pragma('cache_size = -16000');
db.exec(`CREATE TABLE IF NOT EXISTS rows (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, config TEXT NOT NULL,
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL)`);

const config = JSON.stringify({ repo_ref: 'main', graph_config_path: 'langgraph.json', repo_commit_sha: null });
const seedCount = Number(process.env.BASELINE_ROWS ?? 1000);
const insert = db.prepare('INSERT OR IGNORE INTO rows (id, name, status, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
db.transaction(() => {
  const now = new Date().toISOString();
  for (let i = 0; i < seedCount; i += 1) insert.run(seedId(i), `row-${i}`, 'DEPLOYED', config, now, now);
})();
const read = db.prepare('SELECT * FROM rows WHERE id = ?');

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

const server = createServer((req, res) => {
  const send = (status: number, value: unknown) => {
    const text = JSON.stringify(value);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  if (req.method === 'GET' && req.url?.startsWith('/rows/')) {
    const row = read.get(req.url.slice('/rows/'.length)) as Record<string, string> | undefined;
    if (!row) return send(404, { detail: 'not found' });
    return send(200, { ...row, config: JSON.parse(row.config!) });
  }
  if (req.method === 'POST' && req.url === '/rows') {
    readBody(req).then((text) => {
      let input: { name?: unknown; config?: unknown };
      try {
        input = JSON.parse(text);
      } catch {
        return send(422, { detail: 'invalid JSON' });
      }
      const now = new Date().toISOString();
      const row = { id: randomUUID(), name: String(input.name ?? 'row'), status: 'QUEUED', config: JSON.stringify(input.config ?? {}), created_at: now, updated_at: now };
      insert.run(row.id, row.name, row.status, row.config, row.created_at, row.updated_at);
      send(201, { ...row, config: input.config ?? {} });
    }, () => send(400, { detail: 'bad request' }));
    return;
  }
  send(404, { detail: 'not found' });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address();
  process.stderr.write(JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address ? address.port : 0 }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
