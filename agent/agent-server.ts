import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { killGroup, startCommand } from './processes.ts';
import { quote } from './git.ts';
import type { GraphConfig } from './graph-config.ts';
import { forgetServer, orphanOf, recordServer } from './state.ts';

/** A LangGraph agent server this agent started. */
export type RunningAgentServer = { port: number; pid: number; stop(): Promise<void> };

/** A free loopback port (the OS picks one; it is free again when this resolves). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * The command that serves the graphs: for JavaScript the LangGraph CLI the repository installed,
 * else the one this agent ships (`@langchain/langgraph-cli`); for Python `langgraph dev` from PATH.
 */
export function serverCommand(configPath: string, config: GraphConfig, port: number): string {
  const args = `dev --port ${port} --host 127.0.0.1 --no-browser --config ${quote(configPath)}`;
  if (config.language === 'python') return `langgraph ${args}`;
  const own = join(dirname(configPath), 'node_modules', '.bin', 'langgraphjs');
  if (existsSync(own)) return `${quote(own)} ${args}`;
  return `${quote(process.execPath)} ${quote(bundledCli())} ${args}`;
}

function bundledCli(): string {
  const require = createRequire(import.meta.url);
  const manifestPath = require.resolve('@langchain/langgraph-cli/package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { bin: Record<string, string> };
  return join(dirname(manifestPath), manifest.bin.langgraphjs ?? 'dist/cli/cli.mjs');
}

/**
 * Ends the server a previous run of the agent left for `buildDir` (it was killed), if any — only
 * when the recorded process is still the one it started; answers what it did, for the agent's output.
 */
export async function endOrphan(buildDir: string): Promise<string | null> {
  const orphan = orphanOf(buildDir);
  if (!orphan) return null;
  if ('stale' in orphan) return `pid ${orphan.pid} was recorded for this build, but it is another process now (after a reboot, or reused): not killing it`;
  await killGroup(orphan.pid, 2000);
  forgetServer(buildDir, orphan.pid);
  return `ended the agent server (pid ${orphan.pid}) a previous run of the agent left`;
}

/**
 * Starts the agent server for the graph config on a free port and waits until `GET /ok` answers
 * 200. Fails when the process ends first or `timeoutMs` passes (the process is then killed).
 */
export async function startAgentServer(options: {
  buildDir: string;
  configPath: string;
  config: GraphConfig;
  /** Replaces the LangGraph command (a container engine's `run`, for images); `{port}` is substituted. */
  command?: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  signal: AbortSignal;
  onLine: (line: string, stream: 'stdout' | 'stderr') => void;
}): Promise<RunningAgentServer> {
  const port = await freePort();
  const lastLines: string[] = [];
  const command = options.command ? options.command.replaceAll('{port}', String(port)) : serverCommand(options.configPath, options.config, port);
  const child: ChildProcess = startCommand(command, {
    cwd: dirname(options.configPath),
    env: { ...options.env, PORT: String(port) },
    onLine: (line, stream) => {
      lastLines.push(line);
      if (lastLines.length > 20) lastLines.shift();
      options.onLine(line, stream);
    },
  });
  const pid = child.pid!;
  recordServer(options.buildDir, pid);
  let exited: string | null = null;
  child.on('exit', (code, signal) => (exited = `exited with ${signal ?? `code ${code}`}`));
  const stop = async () => {
    await killGroup(pid);
    forgetServer(options.buildDir, pid);
  };
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    if (options.signal.aborted) {
      await stop();
      throw new Error('interrupted while the agent server was starting');
    }
    if (exited) throw new Error(`the agent server ${exited} before it was healthy: ${lastLines.slice(-5).join(' | ')}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the agent server was not healthy (GET /ok) within ${Math.round(options.timeoutMs / 1000)} s: ${lastLines.slice(-5).join(' | ')}`);
    }
    const ok = await fetch(`http://127.0.0.1:${port}/ok`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { port, pid, stop };
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
