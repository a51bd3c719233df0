/**
 * `node bench/profile-get-revision.ts [seconds] [post] [--bare] [--perf]`: profiles the real bundled server
 * under autocannon on GET revision (the Action's hot path), or on POST deployment with `post`, and
 * prints the top functions by self time. `--bare`: then the bare same-SQL server
 * (bench/baselines/http-sqlite.mjs, creates grouped as the server's) on a copy of the server's
 * database, profiled the same way under the same requests, for the side-by-side.
 * The `.cpuprofile` files stay in a temp directory (their paths are printed) for a closer look.
 * `--perf`: Linux `perf record -e cpu-clock` instead of V8's profiler (the servers run with
 * `--perf-basic-prof` to name their compiled JavaScript): it samples only while the process is on
 * a CPU, where V8's profiler samples the wall clock and, on a loaded machine, charges the time a
 * process waited for a CPU to whatever it resumes in (the socket write, mostly). Printed: µs of CPU
 * per request by symbol (JavaScript, V8's builtins, Node's and the kernel's C/C++), and with
 * `--bare` the symbols by how much more the server spends on them per request.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { type LoadRequest, runLoad } from './lib/load.ts';
import type { Child } from './lib/processes.ts';
import { API_KEY, startControlPlane } from './lib/settings.ts';
import { startSqliteBaseline } from './lib/sqlite-baseline.ts';

type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number };

const seconds = Number(process.argv[2] ?? 8);
const post = process.argv.includes('post');
const withBare = process.argv.includes('--bare');
const withPerf = process.argv.includes('--perf');
// `--perf-basic-prof` also has V8 write a log of its own: into the profile's directory, not the checkout.
const profileArgs = (dir: string) => (withPerf ? ['--perf-basic-prof', `--logfile=${join(dir, 'v8.log')}`] : ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
const serverDir = mkdtempSync(join(tmpdir(), 'cp-profile-'));
const server = await startControlPlane({ synchronous: 'FULL' }, { nodeArgs: profileArgs(serverDir) });
const api = apiClient(server.url, API_KEY);
const fx = await workspaceFixtures(api);
const paths: string[] = [];
let tenantId = '';
for (let i = 0; i < 20; i += 1) {
  const created = await api.post('/v2/deployments', githubBody(`profile-${i}-${Date.now()}`, fx.integrationId));
  paths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
  tenantId = created.body.tenant_id;
}
let n = 0;
const requests: LoadRequest[] = post
  ? [
      {
        method: 'POST' as const,
        path: '/v2/deployments',
        headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
        body: () => JSON.stringify(githubBody(`profile-post-${n++}-${Date.now()}`, fx.integrationId)),
      },
    ]
  : paths.map((path) => ({ method: 'GET' as const, path, headers: { 'x-api-key': API_KEY } }));

/** Loads `child` for `seconds`, stops it (which writes its profile) and prints the profile's top functions. */
async function profile(name: string, child: Child, dir: string): Promise<Map<string, number> | undefined> {
  if (withPerf) return perfProfile(name, child, dir);
  const result = await runLoad(child.url, { connections: 32, seconds, requests });
  console.log(`${name}, ${post ? 'POST deployment' : 'GET revision'}: ${Math.round(result.rps)} req/s under the profiler (${result.failures} failures)`);
  await child.stop();
  const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
  if (!file) throw new Error('no profile written');
  const written = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { nodes: Node[]; samples: number[] };
  const total = written.samples.length;
  const self = new Map<string, number>();
  for (const node of written.nodes) {
    const where = `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/server\/dist\//, 'dist/')}:${node.callFrame.lineNumber + 1}`;
    self.set(where, (self.get(where) ?? 0) + (node.hitCount ?? 0));
  }
  console.log(`profile: ${join(dir, file)} (${total} samples)`);
  for (const [where, hits] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`${((hits / total) * 100).toFixed(1).padStart(5)}%  ${where}`);
}

// The copy is taken before the server's run, so the bare server reads the same rows.
const bareDir = mkdtempSync(join(tmpdir(), 'cp-profile-bare-'));
const bare = withBare
  ? await startSqliteBaseline({
      serverDatabasePath: server.databasePath,
      tenantId,
      synchronous: 'FULL',
      groupCommit: true,
      name: 'bare.db',
      nodeArgs: profileArgs(bareDir),
    })
  : undefined;
/**
 * `perf record` of `child` (on-CPU samples, every thread, kernel included where perf may) while it is
 * loaded after a warm-up as long; prints and answers µs of CPU per request by symbol.
 */
async function perfProfile(name: string, child: Child, dir: string): Promise<Map<string, number>> {
  await runLoad(child.url, { connections: 32, seconds, requests });
  const data = join(dir, 'perf.data');
  const recording = spawn('perf', ['record', '-e', 'cpu-clock', '-F', '2000', '-o', data, '-p', String(child.pid)], { stdio: 'ignore' });
  const recorded = new Promise((done) => recording.once('exit', done));
  // perf attaches in well under this.
  await new Promise((resolve) => setTimeout(resolve, 300));
  const result = await runLoad(child.url, { connections: 32, seconds, requests });
  recording.kill('SIGINT');
  await recorded;
  await child.stop();
  const report = execFileSync('perf', ['report', '-i', data, '--stdio', '--no-children', '--sort', 'sym', '-g', 'none'], {
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  });
  rmSync(`/tmp/perf-${child.pid}.map`, { force: true });
  const nanoseconds = Number(/Event count \(approx.\): (\d+)/.exec(report)?.[1] ?? 0);
  const perRequest = new Map<string, number>();
  for (const line of report.split('\n')) {
    const match = /^\s+([\d.]+)%\s+\[.\]\s+(.*?)\s*$/.exec(line);
    // Code addresses and the bundle's content hashes differ from run to run and server to server.
    if (!match) continue;
    const symbol = match[2]!.replace(/\+0x[0-9a-f]+$/, '').replace(/\/(main|chunk)-\w+\.js/, '/$1.js');
    perRequest.set(symbol, (perRequest.get(symbol) ?? 0) + ((Number(match[1]) / 100) * nanoseconds) / 1000 / result.requests);
  }
  console.log(
    `${name}, ${post ? 'POST deployment' : 'GET revision'}: ${Math.round(result.rps)} req/s under perf, ${(nanoseconds / 1000 / result.requests).toFixed(1)} µs CPU per request`,
  );
  for (const [symbol, us] of [...perRequest].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${us.toFixed(2).padStart(7)} µs  ${symbol.slice(0, 140)}`);
  return perRequest;
}

const ours = await profile('the server', server, serverDir);
const theirs = bare ? await profile('the bare server', bare, bareDir) : undefined;
if (ours && theirs) {
  const more = [...new Set([...ours.keys(), ...theirs.keys()])].map((symbol) => [symbol, (ours.get(symbol) ?? 0) - (theirs.get(symbol) ?? 0)] as const);
  console.log('µs of CPU per request the server spends beyond the bare server, by symbol (the largest first; negative: less):');
  for (const [symbol, us] of more.sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${us.toFixed(2).padStart(7)} µs  ${symbol.slice(0, 140)}`);
  console.log(`load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
}
