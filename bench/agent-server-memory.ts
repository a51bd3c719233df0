/**
 * Resident memory of one deployment's agent server, `dev` (the LangGraph CLI's `langgraphjs dev`:
 * `tsx watch` with a file watcher and reloader) against the production command the `local` agent
 * runs (agent/server-command.ts: the API server's entry point run by Node directly). The fixture's
 * one-node graph (test/fixtures/langgraph-app) is installed once with `npm ci` (npm's cache), each
 * mode is started on a free port, answers `GET /ok`, runs the graph 20 times, and after 3 s at rest
 * the resident memory (VmRSS) of every process in its process group is summed. Unsandboxed: bwrap
 * adds one small process (its init, about 1 MB) and changes nothing else.
 *
 *   node bench/agent-server-memory.ts
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../agent/agent-server.ts';
import { readGraphConfig } from '../agent/graph-config.ts';
import { killGroup } from '../agent/processes.ts';
import { productionServerCommand } from '../agent/server-command.ts';

const fixture = resolve(import.meta.dirname, '../test/fixtures/langgraph-app');
const app = mkdtempSync(join(tmpdir(), 'cp-bench-app-'));
cpSync(fixture, app, { recursive: true });
execFileSync('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], {
  cwd: app,
  stdio: 'ignore',
  env: { ...process.env, PATH: `${resolve(process.execPath, '..')}:${process.env.PATH}` },
});

/** Sum of VmRSS (MiB) of the processes whose process group is `pgid`, and how many there are. */
function groupRss(pgid: number): { mib: number; processes: number } {
  let kib = 0;
  let processes = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) !== pgid) continue;
      kib += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${name}/status`, 'utf8'))?.[1] ?? 0);
      processes += 1;
    } catch {
      // gone
    }
  }
  return { mib: Math.round(kib / 1024), processes };
}

async function measure(mode: 'dev' | 'production'): Promise<{ mib: number; processes: number; startMs: number }> {
  const port = await freePort();
  const config = readGraphConfig(join(app, 'langgraph.json'));
  const command =
    mode === 'dev'
      ? `exec ${JSON.stringify(process.execPath)} node_modules/@langchain/langgraph-cli/dist/cli/cli.mjs dev --port ${port} --host 127.0.0.1 --no-browser --config langgraph.json`
      : productionServerCommand(app, config, port, { node: process.execPath, agentModules: null })!;
  const started = Date.now();
  const child = spawn('sh', ['-c', command], {
    cwd: app,
    detached: true,
    stdio: 'ignore',
    env: { PATH: process.env.PATH, HOME: process.env.HOME, LOG_JSON: 'true', BROWSER: 'none' },
  });
  const pgid = child.pid!;
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/ok`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (Date.now() - started > 120_000) throw new Error(`${mode}: not healthy in 120 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const startMs = Date.now() - started;
    for (let i = 0; i < 20; i += 1) {
      const run = await fetch(`http://127.0.0.1:${port}/runs/wait`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ assistant_id: 'agent', input: {} }),
      });
      if (!run.ok) throw new Error(`${mode}: run answered ${run.status}`);
    }
    await new Promise((r) => setTimeout(r, 3000));
    return { ...groupRss(pgid), startMs };
  } finally {
    await killGroup(pgid);
  }
}

const results: Record<string, unknown> = {};
for (const mode of ['dev', 'production'] as const) results[mode] = await measure(mode);
console.log(JSON.stringify({ benchmark: 'agent-server-memory', ...results }, null, 2));
rmSync(app, { recursive: true, force: true });
