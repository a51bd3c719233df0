import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { forgetServer, orphanOf, processIdentity, recordServer, stateDirOf } from './build-records.ts';
import { quote } from './git.ts';
import type { GraphConfig } from './graph-config.ts';
import { killGroup, type Sandboxed, startCommand, untrackGroup } from './processes.ts';
import { productionServerCommand, type ServerPaths } from './server-command.ts';
import { ServerLogTail } from './server-log-tail.ts';
import { firstErrorLine, parseServerLine, type ServerLine } from './server-output.ts';
import { answersOk, type Upstream } from './upstream.ts';

/**
 * A LangGraph agent server this agent started or adopted. `stop()` ends it; `detach()` only stops
 * following its output (the agent is stopping and leaves it serving for its successor).
 */
export type RunningAgentServer = {
  upstream: Upstream;
  pid: number;
  /** Settles when the server's process ends, however (a stop included), saying how. */
  exited: Promise<string>;
  stop(): Promise<void>;
  detach(): void;
};

/**
 * When the process `pid`, which is not this agent's child (a server the previous agent left),
 * ends: its identity (pid and start time) is checked every second, so a reused pid is no
 * stand-in. `until` aborting stops the watch (the promise then never settles).
 */
function endOf(pid: number, identity: string | null, until: AbortSignal): Promise<string> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (until.aborted) clearInterval(timer);
      else if (processIdentity(pid) !== identity) {
        clearInterval(timer);
        resolve('ended');
      }
    }, 1000);
    timer.unref();
  });
}

/** The port a sandboxed server listens on: its network namespace's own loopback, which nothing else shares. */
export const SANDBOXED_SERVER_PORT = 8000;

/**
 * How the proxy reaches a sandboxed server: a relay inside the sandbox (sandbox-relay.mjs) serves
 * `socket.seen` (inside) = `socket.host` (on the host), forwarding to the server's own loopback port.
 * No port is chosen on the machine, so none can be taken first by another process.
 */
export type ServerChannel = { node: string; relay: string; socket: { host: string; seen: string } };

/** Where a server's output goes: beside the checkout with the agent's records, never inside it. */
export function serverLogOf(buildDir: string): string {
  mkdirSync(stateDirOf(buildDir), { recursive: true });
  return join(stateDirOf(buildDir), 'server.log');
}

/**
 * Takes over the server a previous run of the agent left serving `buildDir`: only when the
 * recorded process is still the one started (pid and start time), and answers `GET /ok` on its
 * recorded port. Its output is followed from where it is now. Null when there is none to take.
 */
export async function adoptAgentServer(buildDir: string, onLine: (line: ServerLine) => void): Promise<RunningAgentServer | null> {
  const orphan = orphanOf(buildDir);
  if (!orphan || 'stale' in orphan || orphan.upstream === undefined) return null;
  const upstream = orphan.upstream;
  if (!(await answersOk(upstream, 2000))) return null;
  const tail = new ServerLogTail(
    serverLogOf(buildDir),
    (raw) => {
      const line = parseServerLine(raw, 'stdout');
      if (line) onLine(line);
    },
    { fromEnd: true },
  );
  const pid = orphan.pid;
  const watching = new AbortController();
  return {
    upstream,
    pid,
    exited: endOf(pid, processIdentity(pid), watching.signal),
    stop: async () => {
      await killGroup(pid);
      tail.stop();
      forgetServer(buildDir, pid);
    },
    detach: () => {
      watching.abort();
      tail.stop();
    },
  };
}

/**
 * A free loopback port (the OS picks one; it is free again when this resolves, so another process
 * may take it first): only for servers outside the sandbox (`--sandbox none`, container images).
 */
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
 * The command that serves the graphs: for JavaScript the LangGraph.js API server in production
 * mode (server-command.ts), from the checkout's installed packages or else the agent's own; for
 * Python `langgraph dev` from PATH (the Python CLI has no other in-memory server).
 */
export function serverCommand(cwd: string, config: GraphConfig, port: number, paths: ServerPaths): string {
  if (config.language === 'python')
    return `exec langgraph dev --port ${port} --host 127.0.0.1 --no-browser --no-reload --config ${quote(join(cwd, 'langgraph.json'))}`;
  const command = productionServerCommand(cwd, config, port, paths);
  if (!command)
    throw new Error(
      "neither the repository nor this agent has the LangGraph.js API server (@langchain/langgraph-api); add @langchain/langgraph-cli to the repository's devDependencies",
    );
  return command;
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

/** How often a starting server is asked `GET /ok`. */
const HEALTH_POLL_MS = 25;

/** How long a server that printed a load error gets to become healthy anyway before it is failed. */
const ERROR_GRACE_MS = 3000;

/**
 * Starts the agent server for the graph config on a free port and waits until `GET /ok` answers
 * 200. Fails as soon as the process ends, or when it printed an error and is still not healthy
 * `ERROR_GRACE_MS` later (a graph that does not load: the error's own first line is the failure's
 * message), or when `timeoutMs` passes (the process is then killed).
 */
export async function startAgentServer(options: {
  buildDir: string;
  cwd: string;
  config: GraphConfig;
  /** Replaces the LangGraph command (a container engine's `run`, for images); `{port}` is substituted. */
  command?: string;
  paths: ServerPaths;
  env: NodeJS.ProcessEnv;
  sandbox: Sandboxed | null;
  /** Sandboxed: the server is reached through a unix socket; null: on a free loopback port. */
  channel: ServerChannel | null;
  timeoutMs: number;
  signal: AbortSignal;
  onLine: (line: ServerLine) => void;
}): Promise<RunningAgentServer> {
  const channel = options.channel;
  const port = channel ? SANDBOXED_SERVER_PORT : await freePort();
  const upstream: Upstream = channel ? { socketPath: channel.socket.host } : { port };
  const recent: ServerLine[] = [];
  let firstErrorAt: number | null = null;
  const server = options.command ? options.command.replaceAll('{port}', String(port)) : serverCommand(options.cwd, options.config, port, options.paths);
  const command = channel ? `${quote(channel.node)} ${quote(channel.relay)} ${quote(channel.socket.seen)} ${port} & ${server}` : server;
  const outputFile = serverLogOf(options.buildDir);
  writeFileSync(outputFile, '');
  const onRaw = (raw: string) => {
    const line = parseServerLine(raw, 'stdout');
    if (!line) return;
    recent.push(line);
    if (recent.length > 40) recent.shift();
    if (line.level === 'error' && firstErrorAt === null) firstErrorAt = Date.now();
    options.onLine(line);
  };
  const child: ChildProcess = startCommand(command, {
    cwd: options.cwd,
    env: { ...options.env, PORT: String(port) },
    sandbox: options.sandbox,
    outputFile,
    onLine: () => undefined,
  });
  const tail = new ServerLogTail(outputFile, onRaw);
  const pid = child.pid!;
  recordServer(options.buildDir, pid, upstream);
  let exited: string | null = null;
  const ended = new Promise<string>((resolve) =>
    child.on('exit', (code, signal) => {
      exited = `exited with ${signal ?? `code ${code}`}`;
      resolve(exited);
    }),
  );
  const stop = async () => {
    await killGroup(pid);
    tail.stop();
    forgetServer(options.buildDir, pid);
  };
  const why = () =>
    firstErrorLine(recent) ??
    recent
      .slice(-3)
      .map((l) => l.message)
      .join(' | ');
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    if (options.signal.aborted) {
      await stop();
      throw new Error('interrupted while the agent server was starting');
    }
    if (exited) {
      tail.stop();
      forgetServer(options.buildDir, pid);
      throw new Error(`${why() || 'no output'} (the agent server ${exited} before it was healthy)`);
    }
    if (firstErrorAt !== null && Date.now() - firstErrorAt > ERROR_GRACE_MS) {
      await stop();
      throw new Error(`${why()} (the agent server printed this error and did not become healthy)`);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the agent server was not healthy (GET /ok) within ${Math.round(options.timeoutMs / 1000)} s: ${why()}`);
    }
    if (await answersOk(upstream, 1000)) {
      untrackGroup(pid);
      return { upstream, pid, exited: ended, stop, detach: () => tail.stop() };
    }
    // Asked often: until the server listens, the answer is a refused connection on loopback (or the
    // relay's socket), which costs next to nothing, and every poll missed is time not serving.
    await new Promise((resolve) => setTimeout(resolve, HEALTH_POLL_MS));
  }
}
