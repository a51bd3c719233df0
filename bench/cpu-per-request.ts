/**
 * `node bench/cpu-per-request.ts [--root=<other checkout>] [--bare] [--rounds=3] [--seconds=4]`: the
 * server's own CPU time per request (utime + stime from /proc/<pid>/stat over a closed-loop run) on
 * GET revision and POST deployment. `--root`: this checkout's bundled server against another's,
 * interleaved round by round (both bundles are built first, `node server/build.ts` in each).
 * `--bare`: in every round, the bare same-SQL server (bench/baselines/http-sqlite.mjs, creates
 * committed in groups as the server's) on a copy of that round's server database, the same
 * requests, and this checkout's CPU ÷ the bare server's. CPU per request is far less sensitive
 * than req/s to other work on a shared machine, so it shows what a change saved where the req/s
 * ratios are noise; where the server is CPU-bound, req/s ÷ bare is about bare CPU ÷ server CPU.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { type LoadRequest, runLoad } from './lib/load.ts';
import { type Child, cpuMs, ROOT, startChild, tempDir } from './lib/processes.ts';
import { API_KEY, ENCRYPTION_KEY } from './lib/settings.ts';
import { sameBytes, startSqliteBaseline } from './lib/sqlite-baseline.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const other = arg('root') === undefined ? undefined : resolve(arg('root')!);
const bare = process.argv.includes('--bare');
const rounds = Number(arg('rounds') ?? 3);
const seconds = Number(arg('seconds') ?? 4);
for (const root of other ? [ROOT, other] : [ROOT]) execFileSync(process.execPath, [join(root, 'server/build.ts')], { cwd: root, stdio: 'inherit' });

type Figures = { get: number; post: number; getRps: number; postRps: number };

/** CPU µs per request of `child` on the GET paths, then on creates. */
async function cpuPerRequest(child: Child, gets: LoadRequest[], post: LoadRequest): Promise<Figures> {
  await runLoad(child.url, { connections: 32, seconds: 1, requests: gets });
  let before = cpuMs(child.pid);
  const get = await runLoad(child.url, { connections: 32, seconds, requests: gets });
  const getCpu = cpuMs(child.pid) - before;
  before = cpuMs(child.pid);
  const created = await runLoad(child.url, { connections: 32, seconds, requests: [post] });
  const postCpu = cpuMs(child.pid) - before;
  if (get.failures + created.failures > 0) throw new Error(`failures: ${get.failures} GET, ${created.failures} POST`);
  return { get: (getCpu * 1000) / get.requests, post: (postCpu * 1000) / created.requests, getRps: get.rps, postRps: created.rps };
}

async function measure(root: string, withBare: boolean): Promise<{ server: Figures; bare?: Figures }> {
  const databasePath = join(tempDir(), 'cp.db');
  const server = await startChild(join(root, 'server/dist/main.js'), {
    DATABASE_URL: databasePath,
    BOOTSTRAP_API_KEY: API_KEY,
    ENCRYPTION_KEY,
    LOG_LEVEL: 'info',
    SANDBOX_STAGE_MS: '3600000',
  });
  let baseline: Child | undefined;
  try {
    const api = apiClient(server.url, API_KEY);
    const fx = await workspaceFixtures(api);
    const paths: string[] = [];
    let tenantId = '';
    for (let i = 0; i < 50; i += 1) {
      const created = await api.post('/v2/deployments', githubBody(`cpu-${i}-${crypto.randomUUID().slice(0, 8)}`, fx.integrationId));
      paths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
      tenantId = created.body.tenant_id;
    }
    const headers = { 'x-api-key': API_KEY };
    const gets = paths.map((path) => ({ method: 'GET' as const, path, headers }));
    const post: LoadRequest = {
      method: 'POST',
      path: '/v2/deployments',
      headers: { ...headers, 'content-type': 'application/json' },
      body: () => JSON.stringify(githubBody(`cpu-post-${crypto.randomUUID()}`, fx.integrationId)),
    };
    if (withBare) {
      // The copy is taken before the server's creates, so both answer the same GETs from the same rows.
      baseline = await startSqliteBaseline({ serverDatabasePath: databasePath, tenantId, synchronous: 'FULL', groupCommit: true, name: 'bare.db' });
      await sameBytes(server.url, baseline.url, paths[0]!, headers);
    }
    const figures = await cpuPerRequest(server, gets, post);
    return { server: figures, bare: baseline ? await cpuPerRequest(baseline, gets, post) : undefined };
  } finally {
    await baseline?.stop();
    await server.stop();
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const line = (m: Figures) =>
  `GET revision ${m.get.toFixed(0)} µs CPU/request (${Math.round(m.getRps)} req/s); POST deployment ${m.post.toFixed(0)} µs CPU/request (${Math.round(m.postRps)} req/s)`;
const ratios = { get: [] as number[], post: [] as number[] };
for (let round = 1; round <= rounds; round += 1) {
  for (const [name, root] of other
    ? ([
        ['this', ROOT],
        ['other', other],
      ] as const)
    : ([['this', ROOT]] as const)) {
    const m = await measure(root, bare && name === 'this');
    console.log(`round ${round} ${name.padEnd(5)}: ${line(m.server)}`);
    if (m.bare) {
      console.log(`round ${round} bare : ${line(m.bare)}`);
      ratios.get.push(m.server.get / m.bare.get);
      ratios.post.push(m.server.post / m.bare.post);
    }
  }
}
if (bare)
  console.log(
    `server CPU ÷ bare CPU per request, median of rounds (each round's): GET revision ${median(ratios.get).toFixed(2)} (${ratios.get.map((r) => r.toFixed(2)).join(', ')}); ` +
      `POST deployment ${median(ratios.post).toFixed(2)} (${ratios.post.map((r) => r.toFixed(2)).join(', ')})`,
  );
console.log(`this = ${ROOT}${other ? `, other = ${other}` : ''}; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
