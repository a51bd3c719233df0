import { statSync } from 'node:fs';
import { join } from 'node:path';
import { removeTempDirs, startChild, tempDir } from './lib/processes.ts';

/**
 * `node bench/log-volume.ts [--mb=200] [--line=120] [--uncapped | --no-rate]`: what one agent token's build output does to
 * the SQLite database. A real server (this checkout's `server/main.ts`) on a fresh file; a local
 * listener, its token, one deployment claimed and DEPLOYING; then `--mb` MB of build-like output
 * (lines of `--line` characters, 500 to a request, as the agent batches them) appended as fast as the
 * server answers, a 429 ignored as a hostile agent would. Prints what was sent, what the server
 * answered, the message bytes stored and how much the database files grew. `--uncapped` raises
 * every cap and rate out of the way: the figures of a server without them; `--no-rate` keeps the
 * revision cap and lifts the token's rate (the cap alone). Loopback only.
 */

const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, '').split('=') as [string, string?]));
const MB = Number(args.mb ?? 200);
const uncapped = 'uncapped' in args;
const noRate = 'no-rate' in args;
/** Characters a line (120: build output; 420: the length at which both default caps are reached together). */
const LINE = Number(args.line ?? 120);
const API_KEY = `bench-key-${crypto.randomUUID()}`;

const dir = tempDir();
const database = join(dir, 'control-plane.db');
const size = () => ['', '-wal'].reduce((sum, suffix) => sum + (statSync(database + suffix, { throwIfNoEntry: false })?.size ?? 0), 0);

const server = await startChild('server/main.ts', {
  DATABASE_URL: database,
  BOOTSTRAP_API_KEY: API_KEY,
  LOG_LEVEL: 'info',
  SQLITE_SYNCHRONOUS: 'NORMAL',
  RECONCILE_INTERVAL_MS: '0',
  AGENT_LEASE_MS: '600000',
  ...(noRate ? { LOG_TOKEN_LINES_PER_SECOND: '10000000', LOG_TOKEN_BYTES_PER_SECOND: String(2 ** 40) } : {}),
  ...(uncapped
    ? {
        LOG_REVISION_MAX_LINES: '10000000',
        LOG_REVISION_MAX_BYTES: String(2 ** 40),
        LOG_TOKEN_LINES_PER_SECOND: '10000000',
        LOG_TOKEN_BYTES_PER_SECOND: String(2 ** 40),
      }
    : {}),
});
try {
  const call = async (method: string, path: string, body?: unknown, bearer?: string) => {
    const response = await fetch(server.url + path, {
      method,
      headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : { 'x-api-key': API_KEY }), 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as any) : null };
  };
  const listener = (await call('POST', '/v2/listeners', { compute_type: 'local', compute_id: 'bench' })).body;
  const token = (await call('POST', `/v2/listeners/${listener.id}/tokens`)).body.token as string;
  await call('POST', '/v2/deployments', {
    name: 'flood',
    source: 'external_docker',
    source_config: { listener_id: listener.id },
    source_revision_config: { image_uri: 'registry.example.com/flood:1' },
  });
  const agent = `/v2/listeners/${listener.id}/agent`;
  const work = (await call('POST', `${agent}/claim`, { agent_id: 'bench', wait_seconds: 5 }, token)).body.work;
  await call('POST', `${agent}/claims/${work.claim_id}/transition`, { from: 'AWAITING_DEPLOY', to: 'DEPLOYING' }, token);

  const before = size();
  const line = 'npm verb build output '.repeat(Math.ceil(LINE / 22)).slice(0, LINE);
  const batch = { lines: Array.from({ length: 500 }, () => ({ type: 'deploy', message: line })) };
  const batchBytes = 500 * LINE;
  const requests = Math.ceil((MB * 1e6) / batchBytes);
  const statuses = new Map<number, number>();
  const started = performance.now();
  for (let i = 0; i < requests; i++) {
    const { status } = await call('POST', `${agent}/claims/${work.claim_id}/logs`, batch, token);
    statuses.set(status, (statuses.get(status) ?? 0) + 1);
  }
  const seconds = (performance.now() - started) / 1000;
  const final = await call(
    'POST',
    `${agent}/claims/${work.claim_id}/transition`,
    { from: 'DEPLOYING', to: 'DEPLOY_FAILED', status_message: 'flood over' },
    token,
  );
  const page = await call('POST', `/v1/projects/${work.deployment.id}/revisions/${work.revision.id}/deploy_logs`, { order: 'desc', limit: 1 }, undefined);
  process.stdout.write(
    `${uncapped ? 'uncapped' : noRate ? 'revision cap only (no rate)' : 'default caps'}: sent ${((requests * batchBytes) / 1e6).toFixed(0)} MB in ${requests} requests over ${seconds.toFixed(1)} s; answers ${JSON.stringify(Object.fromEntries(statuses))}; ` +
      `database grew ${((size() - before) / 2 ** 20).toFixed(1)} MiB; end reported: ${final.status} ${final.body?.status}; last line: ${JSON.stringify(page.body.logs[0]?.message.slice(0, 60))}\n`,
  );
} finally {
  await server.stop();
  removeTempDirs();
}
