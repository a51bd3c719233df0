/**
 * `node bench/instructions-per-request.ts [--root=<other checkout>] [--carry=server] [--warm=8000] [--count=2000] [--post] [--keep=<dir>] [--perf-map]`:
 * machine instructions per GET revision (or POST deployment, `--post`), counted by valgrind's callgrind (every thread of the
 * process), for the bundled server and the bare same-SQL server (bench/baselines/http-sqlite.mjs)
 * on copies of one database. Instruction counts do not move with the machine's load, where CPU
 * time per request does by ±10% or more on a shared machine (docs/decisions/hot-paths-round-7.md):
 * they tell whether a server executes more, not whether the same work costs more cycles (caches).
 * Each server runs under valgrind (~50x slower), is given `--warm` GETs (8 connections), then its
 * counters are zeroed, `--count` GETs are sent and the counts dumped; then, as long again, nothing
 * is sent and the counts are dumped once more: the process's own work by the clock (timers,
 * background loops), which valgrind's slowness stretches over the requests, is taken off.
 * `--root`: another checkout's bundled server too. `--carry=server`: the bare server with the whole
 * control plane started idle in its process (BASELINE_CARRY). No setup request reaches a measured
 * server: the deployments are made by a server of their own, whose database is copied, so the
 * measured servers see only the fast lane's GETs (and one through Hono, which caches the key).
 * Needs valgrind (`apt-get install valgrind`); each server takes minutes. A warm-up under 2,000
 * measures V8 still compiling (after 400: ~345,000 instructions a GET for both servers). POSTs are
 * ~40 times slower under valgrind (each group waits for its fsync): `--post --warm=800 --count=800`.
 * `--keep=<dir>`: the dumps (`<name>.out.1` the requests', `.2` the idle stretch's) are kept there,
 * for `callgrind_annotate --inclusive=no|yes` per function, ours less bare's; `--perf-map` names
 * the compiled JavaScript, which callgrind shows as addresses in `[???]`: each address falls in one
 * entry (`<start> <size> <name>`, hex) of `<name>.perf.map`.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { REVISION_RECORD_COLUMNS } from '../server/store/queries/hot-paths.ts';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { ROOT, removeTempDirs, tempDir } from './lib/processes.ts';
import { API_KEY, ENCRYPTION_KEY, startControlPlane } from './lib/settings.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const other = arg('root') === undefined ? undefined : resolve(arg('root')!);
const carried = arg('carry')?.split(',') ?? [];
// After 2,000 GETs V8 still tiered the server's own functions up (Maglev, not yet TurboFan, in
// `--perf-map`'s names) and bare measured 149,500 a GET; after 8,000, 142,900 (hot-paths-round-8.md).
const warm = Number(arg('warm') ?? 8000);
const count = Number(arg('count') ?? 2000);
/** `--keep=<dir>`: callgrind's dumps are copied there (for `callgrind_annotate --inclusive=yes`), not deleted. */
const keep = arg('keep');
/**
 * `--post`: POST deployment instead of GET revision (each a new deployment, its name unique), the
 * bare server writing every row the server's create writes (BASELINE_SAME_ROWS, as `bare-rows` in
 * bench/cpu-per-request.ts), both committing creates in groups.
 */
const post = process.argv.includes('--post');
/**
 * `--perf-map`: the servers run with `--perf-basic-prof`, and with `--keep` their
 * `/tmp/perf-<pid>.map` is copied beside the dumps: the names of the compiled JavaScript that
 * callgrind shows as bare addresses (bench/README.md says how to join them).
 */
const perfMap = process.argv.includes('--perf-map');
const what = post ? 'POST' : 'GET';
for (const root of other ? [ROOT, other] : [ROOT]) execFileSync(process.execPath, [join(root, 'server/build.ts')], { cwd: root, stdio: 'inherit' });

const dir = tempDir('cp-instructions-');
const setup = await startControlPlane({ synchronous: 'FULL' });
const api = apiClient(setup.url, API_KEY);
const fx = await workspaceFixtures(api);
const paths: string[] = [];
let tenantId = '';
const integrationId = fx.integrationId;
for (let i = 0; i < 20; i += 1) {
  const created = await api.post('/v2/deployments', githubBody(`instructions-${i}-${Date.now()}`, fx.integrationId));
  paths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
  tenantId = created.body.tenant_id;
}
await setup.stop();

async function copyOfDatabase(name: string): Promise<string> {
  const path = join(dir, name);
  const source = new Database(setup.databasePath, { readonly: true });
  await source.backup(path);
  source.close();
  return path;
}

// valgrind's gdbserver pipe (what callgrind_control talks to) is named after the user and host
// in the environment: the same on both sides.
const valgrindEnv = { USER: 'root', LOGNAME: 'root', HOST: '127.0.0.1' };
const control = (pid: number, ...command: string[]) =>
  execFileSync('callgrind_control', [...command, String(pid)], { env: { ...process.env, ...valgrindEnv } });

/** `script` of `root` under callgrind, once it has printed its "listening" line. */
async function underCallgrind(name: string, root: string, script: string, env: Record<string, string>) {
  // `--perf-basic-prof` also has V8 write a log of its own, into the working directory (a checkout,
  // the other one's too) unless told where: the temporary folder.
  const nodeArgs = perfMap ? ['--perf-basic-prof', `--logfile=${join(dir, `${name}.v8.log`)}`] : [];
  const child = spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${join(dir, `${name}.out`)}`, process.execPath, ...nodeArgs, join(root, script)], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', ...valgrindEnv, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const port = await new Promise<number>((resolvePort, reject) => {
    const poll = setInterval(() => {
      const match = /"msg":"listening".*?"port":(\d+)/.exec(output);
      if (!match) return;
      clearInterval(poll);
      resolvePort(Number(match[1]));
    }, 200);
    child.once('exit', (code) => {
      clearInterval(poll);
      reject(new Error(`${name} exited with ${code}:\n${output}`));
    });
  });
  return { child, port };
}

const agent = new Agent({ keepAlive: true, maxSockets: 8 });
let created = 0;
/** One GET of `path`, or with `--post` one create (a new name each time, made before the request). */
function send(port: number, path: string): Promise<number> {
  const body = post ? JSON.stringify(githubBody(`instructions-post-${created++}-${crypto.randomUUID()}`, integrationId)) : undefined;
  const headers = post
    ? { 'x-api-key': API_KEY, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body!)) }
    : { 'x-api-key': API_KEY };
  return new Promise((resolveStatus, reject) => {
    const req = request({ host: '127.0.0.1', port, path: post ? '/v2/deployments' : path, method: what, agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolveStatus(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** `n` requests over 8 connections; a connection the server closed meanwhile is retried once. */
async function load(port: number, n: number): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const path = paths[next++ % paths.length]!;
      const status = await send(port, path).catch(() => send(port, path));
      if (status !== (post ? 201 : 200)) throw new Error(`${what} ${path}: ${status}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

/** The instructions of the last dump callgrind wrote for `name`. */
function lastDump(name: string): number {
  const dumps = readdirSync(dir)
    .filter((f) => f.startsWith(`${name}.out.`))
    .sort((a, b) => Number(a.split('.').at(-1)) - Number(b.split('.').at(-1)));
  const text = readFileSync(join(dir, dumps.at(-1)!), 'utf8');
  return Number(/^(?:summary|totals): (\d+)/m.exec(text)![1]);
}

/** Instructions per request of one server: the requests' dump less an idle dump as long. */
async function measure(name: string, root: string, script: string, env: Record<string, string>): Promise<number> {
  const server = await underCallgrind(name, root, script, env);
  try {
    await load(server.port, warm);
    control(server.child.pid!, '-z');
    const started = performance.now();
    await load(server.port, count);
    control(server.child.pid!, '-d', 'requests');
    const measured = lastDump(name);
    const ms = performance.now() - started;
    control(server.child.pid!, '-z');
    await new Promise((done) => setTimeout(done, ms));
    control(server.child.pid!, '-d', 'idle');
    const idle = lastDump(name);
    if (perfMap) {
      // Node writes its map to /tmp, named after the process: moved beside the dumps (or dropped).
      if (keep) cpSync(`/tmp/perf-${server.child.pid}.map`, join(dir, `${name}.perf.map`));
      rmSync(`/tmp/perf-${server.child.pid}.map`, { force: true });
    }
    const perGet = (measured - idle) / count;
    console.log(
      `${name}: ${perGet.toFixed(0)} instructions per ${what} (${(measured / count).toFixed(0)} counted, ${(idle / count).toFixed(0)} of them the process's own work by the clock; ${(ms / 1000).toFixed(0)} s)`,
    );
    return perGet;
  } finally {
    server.child.kill('SIGKILL');
  }
}

const serverEnv = async (name: string) => ({
  DATABASE_URL: await copyOfDatabase(`${name}.db`),
  BOOTSTRAP_API_KEY: API_KEY,
  ENCRYPTION_KEY,
  LOG_LEVEL: 'info',
  SANDBOX_STAGE_MS: '3600000',
  HOST: '127.0.0.1',
  // Under valgrind a connection can wait seconds for its first answer: no limit may cut it.
  KEEP_ALIVE_TIMEOUT_MS: '600000',
  HEADERS_TIMEOUT_MS: '600000',
  REQUEST_TIMEOUT_MS: '600000',
});
const bareEnv = async (name: string, carry?: string) => ({
  BASELINE_DB: await copyOfDatabase(`${name}.db`),
  BASELINE_REVISION_COLUMNS: REVISION_RECORD_COLUMNS,
  BASELINE_TENANT_ID: tenantId,
  BASELINE_SYNCHRONOUS: 'FULL',
  BASELINE_ENCRYPTION_KEY: ENCRYPTION_KEY,
  BASELINE_GROUP_COMMIT: '1',
  BASELINE_SAME_ROWS: post ? '1' : '0',
  // The server's ids for a create's rows (as bench/lib/sqlite-baseline.ts's grouped baselines); the
  // GET floor keeps random ids, which keep it plain JavaScript.
  BASELINE_IDS: post ? 'time-ordered' : 'random',
  ...(carry ? { BASELINE_CARRY: carry } : {}),
});

try {
  const bare = await measure('bare', ROOT, 'bench/baselines/http-sqlite.mjs', await bareEnv('bare'));
  const results: Array<[string, number]> = [['this', await measure('this', ROOT, 'server/dist/main.js', await serverEnv('this'))]];
  if (other) results.push(['other', await measure('other', other, 'server/dist/main.js', await serverEnv('other'))]);
  for (const passenger of carried)
    results.push([
      `bare+${passenger}`,
      await measure(`bare+${passenger}`, ROOT, 'bench/baselines/http-sqlite.mjs', await bareEnv(`bare+${passenger}`, passenger)),
    ]);
  for (const [name, value] of results) console.log(`${name} ÷ bare: ${(value / bare).toFixed(3)}`);
  console.log(`load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} (instruction counts do not depend on it)`);
} finally {
  agent.destroy();
  if (keep) cpSync(dir, resolve(keep), { recursive: true, filter: (f) => !f.endsWith('.db') && !f.includes('.db-') });
  removeTempDirs();
}
