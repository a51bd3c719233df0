/**
 * `node bench/start-against.ts --root=<other checkout> [--rounds=7]`: this checkout's bundled server
 * (`server/dist/main.js`, what `npm start` runs) against another checkout's, their starts alternated
 * (the order reversed every other round), to tell what a change to the start did. Per round and
 * checkout: spawn → the first answered `GET /healthz` on a new database and on an existing one (wall
 * time, and the process's CPU by then from its threads' schedstat), spawn → the first answered
 * `GET …/revisions/:id` on the existing one (the first real request after a start, whatever the
 * start leaves for later: wall time and CPU by then), and RSS 2 s after that. Printed: each checkout's medians with their
 * lowest–highest, and the per-round ratios this ÷ other. Both bundles are built first
 * (`node server/build.ts` in each); each gets one unmeasured start, so both read their compile cache.
 * `--cold`: every start gets an empty compile cache of its own instead (`NODE_COMPILE_CACHE`, which
 * both bundles leave to the operator: Node's compile cache before the sixth round, the code cache of
 * server/bundle-entry.ts after it): what the first start after a build that changed the code costs.
 * `npm run bench -- --only=startup` compares the server with the bare node:http server instead.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Child, ROOT, removeTempDirs, rssBytes, sleep, tempDir, threadsCpuMs } from './lib/processes.ts';
import { API_KEY, startControlPlane } from './lib/settings.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
if (arg('root') === undefined) throw new Error('usage: node bench/start-against.ts --root=<other checkout> [--rounds=7] [--cold]');
const roots = [ROOT, resolve(arg('root')!)];
const rounds = Number(arg('rounds') ?? 7);
for (const root of roots) execFileSync(process.execPath, [join(root, 'server/build.ts')], { cwd: root, stdio: 'inherit' });

const FIGURES = [
  'new database: ms to /healthz',
  'new database: CPU ms',
  'existing: ms to /healthz',
  'existing: CPU ms',
  'existing: ms to first GET revision',
  'existing: CPU ms to first GET revision',
  'idle RSS MB',
] as const;
type Figures = Record<(typeof FIGURES)[number], number[]>;
const auth = { 'x-api-key': API_KEY, 'content-type': 'application/json' };

const cold = process.argv.includes('--cold');
const start = (root: string, databasePath: string) =>
  startControlPlane({ synchronous: 'FULL' }, { databasePath, root, env: cold ? { NODE_COMPILE_CACHE: tempDir() } : {} });

/** Spawn → the answer to `path`, and the process's CPU by then. */
async function firstAnswer(child: Child, path: string, headers: Record<string, string> = {}): Promise<{ ms: number; cpuMs: number }> {
  const sent = performance.now();
  const response = await fetch(`${child.url}${path}`, { headers });
  await response.text();
  if (response.status !== 200) throw new Error(`${path}: ${response.status}`);
  return { ms: child.startMs + (performance.now() - sent), cpuMs: threadsCpuMs(child.pid) };
}

/** A new database's start, then one deployment created on it (its revision is the existing database's first GET). */
async function newDatabase(root: string): Promise<{ databasePath: string; revisionPath: string; first: { ms: number; cpuMs: number } }> {
  const databasePath = join(tempDir(), 'control-plane.db');
  const server = await start(root, databasePath);
  const first = await firstAnswer(server, '/healthz');
  const listeners = (await (await fetch(`${server.url}/v2/listeners`, { headers: auth })).json()) as { resources: Array<{ id: string }> };
  const created = (await (
    await fetch(`${server.url}/v2/deployments`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        name: `start-${crypto.randomUUID().slice(0, 8)}`,
        source: 'external_docker',
        source_config: { listener_id: listeners.resources[0]!.id },
        source_revision_config: { image_uri: 'registry.example.com/acme/agent:1.0.0' },
      }),
    })
  ).json()) as { id: string; latest_revision_id: string };
  await server.stop();
  return { databasePath, revisionPath: `/v2/deployments/${created.id}/revisions/${created.latest_revision_id}`, first };
}

const figures = new Map<string, Figures>(roots.map((root) => [root, Object.fromEntries(FIGURES.map((name) => [name, []])) as unknown as Figures]));
for (const root of roots) await newDatabase(root);
const loadAtStart = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
for (let round = 0; round < rounds; round += 1) {
  for (const root of round % 2 === 0 ? roots : [...roots].reverse()) {
    const of = figures.get(root)!;
    const { databasePath, revisionPath, first } = await newDatabase(root);
    of['new database: ms to /healthz'].push(first.ms);
    of['new database: CPU ms'].push(first.cpuMs);
    let server = await start(root, databasePath);
    const existing = await firstAnswer(server, '/healthz');
    of['existing: ms to /healthz'].push(existing.ms);
    of['existing: CPU ms'].push(existing.cpuMs);
    await server.stop();
    server = await start(root, databasePath);
    const firstGet = await firstAnswer(server, revisionPath, auth);
    of['existing: ms to first GET revision'].push(firstGet.ms);
    of['existing: CPU ms to first GET revision'].push(firstGet.cpuMs);
    await sleep(2000);
    of['idle RSS MB'].push(rssBytes(server.pid) / 2 ** 20);
    await server.stop();
  }
  console.log(`round ${round + 1} of ${rounds} done`);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const spread = (values: number[], digits: number) =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;
const [mine, other] = roots.map((root) => figures.get(root)!);
for (const name of FIGURES) {
  const ratios = mine![name].map((value, i) => value / other![name][i]!);
  console.log(`${name}: this ${spread(mine![name], 1)}, other ${spread(other![name], 1)}; this ÷ other per round ${spread(ratios, 3)}`);
}
console.log(
  `this = ${roots[0]}, other = ${roots[1]}; ${rounds} rounds, compile cache ${cold ? 'empty at every start' : 'warm'}; load average ${loadAtStart} at start, ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} at end`,
);
removeTempDirs();
process.exit(0);
