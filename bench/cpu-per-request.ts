/**
 * `node bench/cpu-per-request.ts [--root=<other checkout>[,<another>…]] [--bare] [--gc] [--rounds=9] [--seconds=2]`: the
 * server's own CPU time per request (utime + stime from /proc/<pid>/stat over a closed-loop run of
 * 32 connections) on GET revision and POST deployment. Every server is started once; then each
 * round runs GET revision on each of them in turn, then POST deployment, the order rotating from
 * round to round, so a ratio compares runs taken seconds apart. `--root`: this checkout's bundled
 * server against another's (both bundles are built first, `node server/build.ts` in each); several,
 * comma-separated, are each measured beside it (`other`, `other2`, …).
 * `--bare`: the bare same-SQL server too (bench/baselines/http-sqlite.mjs, creates committed in
 * groups as the server's) on a copy of this checkout's server database, answering the same requests,
 * twice: as before (`bare`: the create's three rows) and row for row (`bare-rows`: every row the
 * server's create writes, checked table by table before anything is measured; see
 * docs/decisions/hot-paths-round-5-create.md).
 * Printed: each server's median µs per request, and the median of the per-round ratios to this
 * checkout's with their quartiles; then the same for the runs' req/s (the closed loop's throughput,
 * what `npm run bench` judges by), this checkout's ÷ each other's. CPU per request is far less sensitive than req/s to other work
 * on a shared machine (not immune: a loaded machine's caches and frequency inflate it), so it
 * shows what a change saved where req/s ratios are noise; where the server is CPU-bound, req/s ÷
 * bare is about bare CPU ÷ server CPU.
 * `--random-ids`: see `withRandomIds`.
 * `--gc`: every server runs with `--trace-gc-nvp`, and each run also gives the heap bytes the
 * server allocated per request (the sum of the young-generation collections' `allocated=` over the
 * run) and its collections' pauses per request: the garbage of the whole server (Node's HTTP
 * objects included), which the machine's load does not move, where `bench/fast-lane-cpu.ts` counts
 * only the lane's.
 * The experiments' flags (`--together`, `--carry`, `--also`, `--clean`, `--no-rows`) are described
 * where they are read, below, and in docs/decisions/hot-paths-round-7.md.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { type LoadRequest, runLoad } from './lib/load.ts';
import { type Child, cpuMs, ROOT, removeTempDirs, startChild, tempDir } from './lib/processes.ts';
import { API_KEY, ENCRYPTION_KEY } from './lib/settings.ts';
import { sameBytes, sameRowsPerCreate, startSqliteBaseline } from './lib/sqlite-baseline.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const others =
  arg('root')
    ?.split(',')
    .map((root, i) => ({ name: i === 0 ? 'other' : `other${i + 1}`, root: resolve(root) })) ?? [];
const withBare = process.argv.includes('--bare');
const rounds = Number(arg('rounds') ?? 9);
const seconds = Number(arg('seconds') ?? 2);
const withGc = process.argv.includes('--gc');
const gcArgs = withGc ? ['--trace-gc-nvp'] : [];
/**
 * `--carry=server,code`: the bare server once more per passenger (BASELINE_CARRY), to see what a
 * larger process costs it; an entry `<name>:<Node option>[;…]` is the bare server run with those options.
 */
const carried = arg('carry')?.split(',') ?? [];
/**
 * `--together`: each round loads every server at once (32 connections each) instead of one after
 * another, so the machine's other work weighs on all of them alike: on a shared machine whose load
 * moves from second to second, their ratios then hold better (each still counts its own CPU).
 */
const together = process.argv.includes('--together');
/**
 * `--also=<name>:<Node option>[,<Node option>…]` (repeatable): this checkout's server once more, run
 * with those options (e.g. `--also=semi2:--max-semi-space-size=2`), to weigh a setting.
 */
const variants = process.argv
  .filter((a) => a.startsWith('--also='))
  .map((a) => a.slice('--also='.length).split(':'))
  .map(([name, options]) => [name!, options!.split(',')] as const);
/** `--clean`: see `cleanServerOf`. */
const clean = process.argv.includes('--clean');
/** `--no-rows`: leave out the row-for-row bare server (it matters for POST only). */
const withRows = !process.argv.includes('--no-rows');
/**
 * `--random-ids`: with `--bare`, the row-for-row bare server once more with random ids for a
 * create's rows (`bare-rows-random`), as the server's were before they were time-ordered: the bare
 * servers otherwise write the server's time-ordered ids (docs/decisions/time-ordered-ids.md).
 */
const withRandomIds = process.argv.includes('--random-ids');
for (const root of [ROOT, ...others.map((other) => other.root)])
  execFileSync(process.execPath, [join(root, 'server/build.ts')], { cwd: root, stdio: 'inherit' });

type Measured = { name: string; child: Child; gets: LoadRequest[]; post: LoadRequest };

/** A bundled server of `root` with 50 deployments whose revisions its GETs read. */
async function serverOf(name: string, root: string, nodeArgs: readonly string[] = []): Promise<Measured & { databasePath: string; tenantId: string }> {
  const databasePath = join(tempDir(), 'cp.db');
  const child = await startChild(
    join(root, 'server/dist/main.js'),
    {
      DATABASE_URL: databasePath,
      BOOTSTRAP_API_KEY: API_KEY,
      ENCRYPTION_KEY,
      LOG_LEVEL: 'info',
      SANDBOX_STAGE_MS: '3600000',
    },
    [...gcArgs, ...nodeArgs],
  );
  const api = apiClient(child.url, API_KEY);
  const fx = await workspaceFixtures(api);
  const paths: string[] = [];
  let tenantId = '';
  for (let i = 0; i < 50; i += 1) {
    const created = await api.post('/v2/deployments', githubBody(`cpu-${i}-${crypto.randomUUID().slice(0, 8)}`, fx.integrationId));
    paths.push(`/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`);
    tenantId = created.body.tenant_id;
  }
  const headers = { 'x-api-key': API_KEY };
  return {
    name,
    child,
    databasePath,
    tenantId,
    gets: paths.map((path) => ({ method: 'GET' as const, path, headers })),
    post: {
      method: 'POST',
      path: '/v2/deployments',
      headers: { ...headers, 'content-type': 'application/json' },
      body: () => JSON.stringify(githubBody(`cpu-post-${crypto.randomUUID()}`, fx.integrationId)),
    },
  };
}

/**
 * This checkout's server once more, on a copy of `self`'s database made now, given nothing but the
 * fast lane's GETs (`--clean`; its POST rounds are skipped): no request of this process goes through
 * Hono but the first, which caches the key. Does serving Hono's requests (the setup's, the POST
 * rounds') make the same lane's GETs cost more afterwards?
 */
async function cleanServerOf(self: Measured & { databasePath: string }): Promise<Measured> {
  const databasePath = join(tempDir(), 'cp-clean.db');
  const source = new Database(self.databasePath, { readonly: true });
  await source.backup(databasePath);
  source.close();
  const child = await startChild(
    join(ROOT, 'server/dist/main.js'),
    { DATABASE_URL: databasePath, BOOTSTRAP_API_KEY: API_KEY, ENCRYPTION_KEY, LOG_LEVEL: 'info', SANDBOX_STAGE_MS: '3600000' },
    gcArgs,
  );
  return { name: 'clean', child, gets: self.gets, post: self.post };
}

/** Heap bytes allocated and collection pause (µs) per request of one run, from its `--trace-gc-nvp` lines. */
type Garbage = { bytes: number; pauseUs: number };

/**
 * The garbage per request of a run that served `requests` in `ms`, from the `--trace-gc-nvp` lines
 * the server wrote meanwhile. A collection's `allocated=` is what was allocated since the one
 * before, and a young-generation collection comes every few MB (every ~14 MB in the server:
 * ±800 bytes a request over a 2-second run, counted whole or not at all), so the bytes are those
 * between the run's first and last collections, over the requests of that time at the run's rate.
 */
function garbageOf(text: string, requests: number, ms: number): Garbage | undefined {
  const collections = [...text.matchAll(/ (\d+) ms: pause=([0-9.]+) .* allocated=(\d+) /g)].map((m) => ({
    at: Number(m[1]),
    pause: Number(m[2]),
    allocated: Number(m[3]),
  }));
  if (collections.length < 2) return undefined;
  const between = collections.slice(1).reduce((sum, c) => sum + c.allocated, 0);
  const span = collections.at(-1)!.at - collections[0]!.at;
  return { bytes: between / ((requests * span) / ms), pauseUs: (collections.reduce((sum, c) => sum + c.pause, 0) * 1000) / requests };
}

/** CPU µs per request of one closed-loop run, its req/s, and with `--gc` its garbage. */
async function cpuPerRequest(child: Child, requests: LoadRequest[]): Promise<{ cpu: number; rate: number; garbage?: Garbage }> {
  const before = cpuMs(child.pid);
  const outputBefore = child.output().length;
  const run = await runLoad(child.url, { connections: 32, seconds, requests });
  if (run.failures > 0) throw new Error(`${run.failures} failures`);
  const cpu = ((cpuMs(child.pid) - before) * 1000) / run.requests;
  const rate = run.requests / seconds;
  if (!withGc) return { cpu, rate };
  return { cpu, rate, garbage: garbageOf(child.output().slice(outputBefore), run.requests, seconds * 1000) };
}

const servers: Measured[] = [];
try {
  const self = await serverOf('this', ROOT);
  servers.push(self);
  for (const { name, root } of others) servers.push(await serverOf(name, root));
  if (clean) servers.push(await cleanServerOf(self));
  for (const [name, options] of variants) servers.push(await serverOf(name, ROOT, options));
  if (withBare) {
    const kinds = [
      // The GET floor too: random ids keep it plain JavaScript (bench/lib/sqlite-baseline.ts); its
      // POST (three rows) is the secondary figure, row for row the one that decides.
      { name: 'bare', sameRows: false, ids: 'random' as const },
      ...(withRows ? [{ name: 'bare-rows', sameRows: true, ids: 'time-ordered' as const }] : []),
      ...(withRandomIds ? [{ name: 'bare-rows-random', sameRows: true, ids: 'random' as const }] : []),
    ];
    for (const { name, sameRows, ids } of kinds) {
      const child = await startSqliteBaseline({
        serverDatabasePath: self.databasePath,
        tenantId: self.tenantId,
        synchronous: 'FULL',
        groupCommit: true,
        sameRows,
        ids,
        name: `${name}.db`,
        nodeArgs: gcArgs,
      });
      servers.push({ name, child, gets: self.gets, post: self.post });
      await sameBytes(self.child.url, child.url, self.gets[0]!.path, { 'x-api-key': API_KEY });
      if (sameRows) console.log(await sameRowsPerCreate({ ...self, url: self.child.url }, { ...child, post: self.post }));
    }
  }
  for (const passenger of carried) {
    // `<name>:<Node option>[;<Node option>…]`: no passenger, the bare server run with those options.
    const [name, options] = passenger.split(':') as [string, string | undefined];
    const child = await startSqliteBaseline({
      serverDatabasePath: self.databasePath,
      tenantId: self.tenantId,
      synchronous: 'FULL',
      groupCommit: true,
      name: `bare-${name}.db`,
      nodeArgs: [...gcArgs, ...(options?.split(';') ?? [])],
      carry: options === undefined ? passenger : undefined,
    });
    servers.push({ name: `bare+${name}`, child, gets: self.gets, post: self.post });
    await sameBytes(self.child.url, child.url, self.gets[0]!.path, { 'x-api-key': API_KEY });
  }
  for (const s of servers) await runLoad(s.child.url, { connections: 32, seconds: 1, requests: s.gets });
  const figures = { get: servers.map((): number[] => []), post: servers.map((): number[] => []) };
  const rates = { get: servers.map((): number[] => []), post: servers.map((): number[] => []) };
  const garbage = { get: servers.map((): Garbage[] => []), post: servers.map((): Garbage[] => []) };
  const measure = async (path: 'get' | 'post', i: number) => {
    if (path === 'post' && servers[i]!.name === 'clean') {
      figures.post[i]!.push(Number.NaN);
      rates.post[i]!.push(Number.NaN);
      return;
    }
    const measured = await cpuPerRequest(servers[i]!.child, path === 'get' ? servers[i]!.gets : [servers[i]!.post]);
    figures[path][i]!.push(measured.cpu);
    rates[path][i]!.push(measured.rate);
    if (measured.garbage) garbage[path][i]!.push(measured.garbage);
  };
  for (let round = 0; round < rounds; round += 1) {
    const order = servers.map((_, i) => (i + round) % servers.length);
    if (together) {
      await Promise.all(order.map((i) => measure('get', i)));
      await Promise.all(order.map((i) => measure('post', i)));
    } else {
      for (const i of order) await measure('get', i);
      for (const i of order) await measure('post', i);
    }
    console.log(
      `round ${round + 1}: ${servers.map((s, i) => `${s.name} GET ${figures.get[i]!.at(-1)!.toFixed(0)} POST ${figures.post[i]!.at(-1)!.toFixed(0)}`).join('; ')} µs CPU/request`,
    );
  }
  const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
  const quartiles = (values: number[]) => {
    const s = sorted(values);
    const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!.toFixed(2);
    return `${at(0.5)} (quartiles ${at(0.25)}–${at(0.75)})`;
  };
  for (const path of ['get', 'post'] as const) {
    const label = path === 'get' ? 'GET revision' : 'POST deployment';
    console.log(`${label}: ${servers.map((s, i) => `${s.name} ${sorted(figures[path][i]!)[Math.floor(rounds / 2)]!.toFixed(0)} µs`).join(', ')} (medians)`);
    for (let i = 1; i < servers.length; i += 1)
      console.log(`  this ÷ ${servers[i]!.name}, per round: ${quartiles(figures[path][0]!.map((value, round) => value / figures[path][i]![round]!))}`);
    console.log(`  req/s: ${servers.map((s, i) => `${s.name} ${sorted(rates[path][i]!)[Math.floor(rounds / 2)]!.toFixed(0)}`).join(', ')} (medians)`);
    for (let i = 1; i < servers.length; i += 1)
      console.log(`    this ÷ ${servers[i]!.name}, per round: ${quartiles(rates[path][0]!.map((value, round) => value / rates[path][i]![round]!))}`);
    const bare = servers.findIndex((s) => s.name === 'bare');
    for (let i = 0; i < servers.length; i += 1)
      if (servers[i]!.name.startsWith('bare+'))
        console.log(`  ${servers[i]!.name} ÷ bare, per round: ${quartiles(figures[path][i]!.map((value, round) => value / figures[path][bare]![round]!))}`);
    if (withGc) {
      // A run with fewer than two collections (a large young generation) has no figure.
      const median = (values: number[]) => (values.length === 0 ? Number.NaN : sorted(values)[Math.floor(values.length / 2)]!);
      console.log(
        `  heap bytes allocated per request (medians of the rounds; collection pauses µs per request): ${servers
          .map(
            (s, i) => `${s.name} ${median(garbage[path][i]!.map((g) => g.bytes)).toFixed(0)} (${median(garbage[path][i]!.map((g) => g.pauseUs)).toFixed(1)})`,
          )
          .join(', ')}`,
      );
    }
  }
  console.log(
    `this = ${ROOT}${others.map(({ name, root }) => `, ${name} = ${root}`).join('')}; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );
} finally {
  for (const s of servers) await s.child.stop();
  // The servers' databases and the baselines' copies (and a carried server's database beside them).
  removeTempDirs();
}
