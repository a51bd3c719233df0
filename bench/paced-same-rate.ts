/**
 * `node bench/paced-same-rate.ts [--rate=N] [--rounds=5] [--seconds=6] [--root=<other checkout>]`:
 * GET revision paced at ONE rate (by the C generator where it builds, else the Node one) against
 * the bare fixed-answer server, this checkout's bundled server and, with `--root`, another
 * checkout's, in interleaved rounds; each server runs under `--trace-gc`, so every round also says
 * how many young-generation collections it had and how long they paused it.
 *
 * The hot-paths scenario paces each server at half of *its own* maximum, so the bare servers there
 * run at two to three times the server's rate, and their p99 is the floor at the same utilization,
 * not at the same load. This one holds the load still: at the server's rate the bare server's p99
 * is what the machine and the generator leave, and a difference between two checkouts is theirs.
 * `--rate` defaults to half of this checkout's closed-loop maximum (32 connections, 4 s after a 3 s
 * warm-up). Both bundles are built first (`node server/build.ts` in each).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { apiClient } from '../test/helpers/api.ts';
import { githubBody, workspaceFixtures } from '../test/helpers/fixtures.ts';
import { type LoadRequest, runLoad } from './lib/load.ts';
import { nativeLoadgen, runPaced } from './lib/native.ts';
import { type Child, ROOT, removeTempDirs, startChild } from './lib/processes.ts';
import { API_KEY, settingsFrom, startControlPlane } from './lib/settings.ts';

const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const rounds = Number(arg('rounds') ?? 5);
const seconds = Number(arg('seconds') ?? 6);
const other = arg('root') ? resolve(arg('root')!) : undefined;

type Target = { name: string; child: Child; requests: LoadRequest[] };

/** Pauses of the young-generation collections `--trace-gc` printed after `from` (an offset in the output). */
function scavenges(output: string, from: number): number[] {
  return [...output.slice(from).matchAll(/Scavenge[^\n]*?, ([\d.]+) \/ [\d.]+ ms/g)].map((m) => Number(m[1]));
}

async function startServer(name: string, root?: string): Promise<Target> {
  const child = await startControlPlane(settingsFrom([]), { root, nodeArgs: ['--trace-gc'] });
  const api = apiClient(child.url, API_KEY);
  const fx = await workspaceFixtures(api);
  const requests: LoadRequest[] = [];
  for (let i = 0; i < 100; i += 1) {
    const created = await api.post('/v2/deployments', githubBody(`same-rate-${i}-${crypto.randomUUID().slice(0, 8)}`, fx.integrationId));
    if (created.status !== 201) throw new Error(`${name}: create answered ${created.status}`);
    requests.push({
      method: 'GET',
      path: `/v2/deployments/${created.body.id}/revisions/${created.body.latest_revision_id}`,
      headers: { 'x-api-key': API_KEY },
    });
  }
  await runLoad(child.url, { connections: 32, seconds: 3, requests });
  return { name, child, requests };
}

// This checkout's bundle is built by startControlPlane; the other's here.
if (other) execFileSync(process.execPath, [join(other, 'server/build.ts')], { cwd: other, stdio: 'inherit' });
const targets: Target[] = [];
try {
  const ours = await startServer('this');
  const bare = await startChild('bench/baselines/http-fixed.mjs', {}, ['--trace-gc']);
  targets.push({ name: 'bare', child: bare, requests: ours.requests }, ours);
  if (other) targets.push(await startServer('other', other));
  const rate = Number(arg('rate') ?? Math.round((await runLoad(ours.child.url, { connections: 32, seconds: 4, requests: ours.requests })).rps / 2));
  console.log(`GET revision paced at ${rate}/s, ${rounds} interleaved rounds of ${seconds} s, by the ${nativeLoadgen() ? 'C' : 'Node'} generator`);
  const p99s = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  for (let round = 1; round <= rounds; round += 1) {
    for (const t of targets) {
      const from = t.child.output().length;
      const r = await runPaced(t.child.url, { connections: 32, seconds, requests: t.requests, rate });
      const pauses = scavenges(t.child.output(), from);
      const mean = pauses.reduce((a, b) => a + b, 0) / Math.max(1, pauses.length);
      p99s.get(t.name)!.push(r.p99);
      console.log(
        `round ${round} ${t.name.padEnd(5)}: p50 ${r.p50.toFixed(2)} p99 ${r.p99.toFixed(2)} ms, from send ${r.p99FromSendMs.toFixed(2)} ms; longest silence ${r.longestSilenceMs.toFixed(1)} ms; ` +
          `${pauses.length} young-generation collections, mean ${mean.toFixed(2)} ms, longest ${Math.max(0, ...pauses).toFixed(2)} ms${r.failures ? `; ${r.failures} failures` : ''}`,
      );
    }
  }
  for (const [name, values] of p99s) {
    const sorted = [...values].sort((a, b) => a - b);
    console.log(`${name.padEnd(5)}: p99 ${values.map((v) => v.toFixed(2)).join(', ')} ms; median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(2)} ms`);
  }
  console.log(`this = ${ROOT}${other ? `, other = ${other}` : ''}; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
} finally {
  for (const t of targets) await t.child.stop();
  removeTempDirs();
}
