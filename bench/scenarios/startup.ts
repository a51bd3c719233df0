import { join } from 'node:path';
import Database from 'better-sqlite3';
import { apiClient } from '../../test/helpers/api.ts';
import { rssBytes, sleep, startChild, tempDir } from '../lib/processes.ts';
import { API_KEY, type Settings, startControlPlane } from '../lib/settings.ts';
import { type Row, verdict } from '../lib/table.ts';

/**
 * Start time (spawn of `node server/dist/main.js`, what `npm start` runs, → its "listening" line, on a new database, so the
 * migrations and bootstrap are included) and idle memory (RSS two seconds after one request).
 */
export async function startup(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  const rounds = settings.quick ? 1 : 5;
  log(`startup: ${rounds} cold starts`);
  const startMs: number[] = [];
  const idle: number[] = [];
  let databasePath = '';
  for (let i = 0; i < rounds; i += 1) {
    const server = await startControlPlane(settings);
    databasePath = server.databasePath;
    try {
      startMs.push(server.startMs);
      const health = await apiClient(server.url, API_KEY).get('/v2/deployments');
      if (health.status !== 200) throw new Error(`list: ${health.status}`);
      await sleep(2000);
      idle.push(rssBytes(server.pid));
    } finally {
      await server.stop();
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const idleMb = median(idle) / 2 ** 20;
  // The floor: what Node itself holds idle, with and without better-sqlite3 loaded.
  const floors: string[] = [];
  for (const [name, script, env] of [
    ['node:http', 'bench/baselines/http-fixed.mjs', {}],
    ['node:http+SQLite', 'bench/baselines/http-sqlite.mjs', { BASELINE_DB: await copyOf(databasePath) }],
  ] as const) {
    const child = await startChild(script, env);
    try {
      await fetch(`${child.url}/`).then((r) => r.text());
      await sleep(2000);
      floors.push(`${name} baseline ${(rssBytes(child.pid) / 2 ** 20).toFixed(1)} MB, started in ${child.startMs.toFixed(0)} ms`);
    } finally {
      await child.stop();
    }
  }
  return [
    {
      scenario: 'server start (spawn → listening, new DB)',
      p50: median(startMs),
      max: Math.max(...startMs),
      target: '< 1 s',
      verdict: verdict(median(startMs) < 1000),
      note: `median of ${rounds} starts (max = slowest)`,
    },
    {
      scenario: 'idle memory (RSS)',
      target: '< 100 MB',
      verdict: verdict(idleMb < 100),
      note: `${idleMb.toFixed(1)} MB (median of ${rounds}); ${floors.join('; ')}`,
    },
  ];
}

/** A copy of a server's database (the SQLite baseline opens the control plane's schema). */
async function copyOf(path: string): Promise<string> {
  const copy = join(tempDir(), 'baseline.db');
  const source = new Database(path, { readonly: true });
  await source.backup(copy);
  source.close();
  return copy;
}
