import { arch, cpus, loadavg, totalmem } from 'node:os';
import { removeTempDirs } from './lib/processes.ts';
import { settingsFrom } from './lib/settings.ts';
import { type Row, renderTable } from './lib/table.ts';
import { clusterThroughput } from './scenarios/cluster.ts';
import { hotPaths } from './scenarios/hot-paths.ts';
import { longPoll } from './scenarios/long-poll.ts';
import { scale } from './scenarios/scale.ts';
import { startup } from './scenarios/startup.ts';
import { webhookHistory } from './scenarios/webhook-history.ts';
import { webhookPush } from './scenarios/webhook-push.ts';

/**
 * `npm run bench [-- --quick] [--only=hot,scale,longpoll,startup,webhook,history,cluster] [--sqlite-synchronous=NORMAL] [--backend=postgres]`: starts the two
 * baselines and the real server as child processes, drives them with autocannon and prints one
 * table. Not part of `npm test`.
 */
async function run(argv: string[]): Promise<void> {
  const settings = settingsFrom(argv);
  const only = argv
    .find((a) => a.startsWith('--only='))
    ?.slice('--only='.length)
    .split(',');
  const wanted = (name: string) => !only || only.includes(name);
  const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  const started = Date.now();
  const loadBefore = loadavg()[0]!.toFixed(2);
  const rows: Row[] = [];
  if (wanted('hot')) rows.push(...(await hotPaths(settings, log)));
  if (wanted('longpoll')) rows.push(...(await longPoll(settings, log)));
  if (wanted('scale')) rows.push(...(await scale(settings, log)));
  if (wanted('webhook')) rows.push(...(await webhookPush(settings, log)));
  if (wanted('history')) rows.push(...(await webhookHistory(settings, log)));
  if (wanted('startup')) rows.push(...(await startup(settings, log)));
  if (wanted('cluster')) rows.push(...(await clusterThroughput(settings, log)));

  const cpu = cpus();
  const header = [
    `machine: ${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'} (${arch()}), ${Math.round(totalmem() / 2 ** 30)} GiB RAM`,
    `node: ${process.version}; load: autocannon, ${settings.connections} connections, no pipelining; ` +
      `${settings.runs} run(s) of ${settings.seconds} s after ${settings.warmupSeconds} s warm-up, median by req/s; paced open loop ${settings.pacedRounds} × ${settings.openSeconds} s at 50% of that max, median by p99`,
    `SQLite synchronous=${settings.synchronous} (server and SQLite baseline); 1-minute load average ${loadBefore} at start, ${loadavg()[0]!.toFixed(2)} at end (other work on the machine)`,
    `date: ${new Date().toISOString()}; ${settings.quick ? 'QUICK run (smaller, shorter: not for RESULTS.md)' : 'full run'}; took ${Math.round((Date.now() - started) / 1000)} s`,
  ];
  process.stdout.write(`\n${header.join('\n')}\n\n${renderTable(rows)}\n`);
}

try {
  await run(process.argv.slice(2));
} finally {
  removeTempDirs();
}
