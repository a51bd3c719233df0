import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { rssBytes, sleep, startChild, tempDir, threadsCpuMs } from '../lib/processes.ts';
import { API_KEY, type Settings, startControlPlane } from '../lib/settings.ts';
import { type Row, verdict } from '../lib/table.ts';

type Start = { ms: number; cpuMs: number; pid: number; url: string; stop(): Promise<void> };

/**
 * Start to the first healthy answer, the server (`server/dist/main.js`, what `npm start` runs) against
 * the bare node:http + better-sqlite3 baseline, on a new database and on an existing one, rounds
 * interleaved (server new, baseline new, server existing, baseline existing): spawn → the first
 * answered request (GET /healthz; the baseline answers GET /), wall time and the process's CPU
 * time by then (less sensitive to a loaded machine; its threads' schedstat, in ns). The baseline's new database gets the server's
 * schema in one transaction (bench/baselines/http-sqlite-new-database.mjs), so both create the same
 * tables. Idle memory: RSS two seconds after one API request, against the baseline's after one
 * request. Each row is the median of the per-round ratios, with their spread (min–max).
 */
export async function startup(settings: Settings, log: (line: string) => void): Promise<Row[]> {
  const rounds = settings.quick ? 2 : 7;
  log(`startup: ${rounds} rounds of server and baseline starts, interleaved`);
  const ratios = { newWall: [] as number[], newCpu: [] as number[], existingWall: [] as number[], existingCpu: [] as number[], idle: [] as number[] };
  const figures = { serverNew: [] as number[], bareNew: [] as number[], serverExisting: [] as number[], bareExisting: [] as number[] };
  const idleMb = { server: [] as number[], bare: [] as number[] };
  let schema = '';
  for (let round = 0; round < rounds; round += 1) {
    const dir = tempDir();
    const serverDb = join(dir, 'control-plane.db');
    const serverNew = await startServer(settings, serverDb);
    await serverNew.stop();
    // The first round's server made the schema the baselines create.
    schema ||= schemaOf(serverDb, join(dir, 'schema.sql'));
    const bareNew = await startBare({ BASELINE_DB: join(dir, 'baseline-new.db'), BASELINE_SCHEMA: schema }, 'bench/baselines/http-sqlite-new-database.mjs');
    await bareNew.stop();
    const serverExisting = await startServer(settings, serverDb);
    const listed = await fetch(`${serverExisting.url}/v2/deployments`, { headers: { 'x-api-key': API_KEY } });
    if (listed.status !== 200) throw new Error(`list: ${listed.status}`);
    await listed.text();
    const bareExisting = await startBare({ BASELINE_DB: await copyOf(serverDb, join(dir, 'baseline.db')) }, 'bench/baselines/http-sqlite.mjs');
    await sleep(2000);
    idleMb.server.push(rssBytes(serverExisting.pid) / 2 ** 20);
    idleMb.bare.push(rssBytes(bareExisting.pid) / 2 ** 20);
    await Promise.all([serverExisting.stop(), bareExisting.stop()]);
    ratios.newWall.push(serverNew.ms / bareNew.ms);
    ratios.newCpu.push(serverNew.cpuMs / bareNew.cpuMs);
    ratios.existingWall.push(serverExisting.ms / bareExisting.ms);
    ratios.existingCpu.push(serverExisting.cpuMs / bareExisting.cpuMs);
    ratios.idle.push(idleMb.server.at(-1)! / idleMb.bare.at(-1)!);
    figures.serverNew.push(serverNew.ms);
    figures.bareNew.push(bareNew.ms);
    figures.serverExisting.push(serverExisting.ms);
    figures.bareExisting.push(bareExisting.ms);
    log(
      `startup round ${round + 1}: new ${serverNew.ms.toFixed(0)} ms (${serverNew.cpuMs.toFixed(0)} ms CPU) vs ${bareNew.ms.toFixed(0)} (${bareNew.cpuMs.toFixed(0)}); ` +
        `existing ${serverExisting.ms.toFixed(0)} (${serverExisting.cpuMs.toFixed(0)}) vs ${bareExisting.ms.toFixed(0)} (${bareExisting.cpuMs.toFixed(0)}); ` +
        `idle ${idleMb.server.at(-1)!.toFixed(1)} MB vs ${idleMb.bare.at(-1)!.toFixed(1)}`,
    );
  }
  const spread = (values: number[]) => `${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)}`;
  const startRow = (scenario: string, wall: number[], cpu: number[], server: number[], bare: number[]): Row => ({
    scenario,
    p50: median(server),
    max: Math.max(...server),
    ratio: `${median(wall).toFixed(2)}× bare (${spread(wall)}); CPU ${median(cpu).toFixed(2)}× (${spread(cpu)})`,
    target: '≤ 1.5× bare',
    verdict: verdict(median(wall) <= 1.5),
    note: `bare ${median(bare).toFixed(0)} ms; median of ${rounds} interleaved rounds`,
  });
  return [
    startRow('server start → first healthy answer, new DB', ratios.newWall, ratios.newCpu, figures.serverNew, figures.bareNew),
    startRow('server start → first healthy answer, existing DB', ratios.existingWall, ratios.existingCpu, figures.serverExisting, figures.bareExisting),
    {
      scenario: 'idle memory (RSS)',
      ratio: `${median(ratios.idle).toFixed(2)}× bare (${spread(ratios.idle)})`,
      target: '≤ 1.25× bare',
      verdict: verdict(median(ratios.idle) <= 1.25),
      note: `${median(idleMb.server).toFixed(1)} MB vs node:http+SQLite ${median(idleMb.bare).toFixed(1)} MB (median of ${rounds})`,
    },
  ];
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** The server on `databasePath` (made if new), to its first GET /healthz answer. */
async function startServer(settings: Settings, databasePath: string): Promise<Start> {
  return firstAnswer(await startControlPlane(settings, { databasePath }), '/healthz');
}

async function startBare(env: Record<string, string>, script: string): Promise<Start> {
  return firstAnswer(await startChild(script, env), '/');
}

/** Spawn → the first answer to `path` (the child's start is timed from its spawn), and its CPU time by then. */
async function firstAnswer(child: Awaited<ReturnType<typeof startChild>>, path: string): Promise<Start> {
  const sent = performance.now();
  const response = await fetch(`${child.url}${path}`);
  await response.text();
  const ms = child.startMs + (performance.now() - sent);
  if (!response.ok && path !== '/') throw new Error(`${path}: ${response.status}`);
  return { ms, cpuMs: threadsCpuMs(child.pid), pid: child.pid, url: child.url, stop: () => child.stop() };
}

/** The server's schema (tables, indexes, triggers) as SQL statements in a file, for the baseline's new database. */
function schemaOf(databasePath: string, file: string): string {
  const db = new Database(databasePath, { readonly: true });
  const statements = db
    .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type = 'table' DESC, rowid")
    .pluck()
    .all() as string[];
  db.close();
  writeFileSync(file, statements.join(';\n'));
  return file;
}

/** A copy of a server's database (the SQLite baseline opens the control plane's schema). */
async function copyOf(path: string, copy: string): Promise<string> {
  const source = new Database(path, { readonly: true });
  await source.backup(copy);
  source.close();
  return copy;
}
