import { type ChildProcess, spawn } from 'node:child_process';
import { resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '../..');

export type ListeningChild = {
  url: string;
  port: number;
  pid: number;
  /** ms from spawn to the "listening" log line. */
  startMs: number;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** Sends the signal (SIGTERM by default) and waits for the process to exit. */
  stop(signal?: NodeJS.Signals): Promise<void>;
};

/**
 * Starts `script` (relative to the repository) with the Node that runs this code, on a port the OS
 * chooses, and waits for its JSON `"msg":"listening"` log line with the port: the server and the
 * benchmark baselines all print one. Shared by the tests and the benchmarks. `nodeArgs` go to
 * Node before the script (e.g. `--trace-gc`).
 */
export async function startListeningChild(
  script: string,
  env: Record<string, string>,
  timeoutMs = 60_000,
  nodeArgs: readonly string[] = [],
): Promise<ListeningChild> {
  const started = performance.now();
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, resolve(ROOT, script)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const port = await new Promise<number>((resolvePort, reject) => {
    // One that missed its deadline is killed: left running, each such server of a loaded run
    // stayed alive to the end of the run (13 minutes in one) and loaded the machine further.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${script} did not start in time (${timeoutMs} ms):\n${output}`));
    }, timeoutMs);
    const onData = () => {
      const match = /"msg":"listening".*?"port":(\d+)/.exec(output);
      if (!match) return;
      clearTimeout(timer);
      child.stderr!.off('data', onData);
      resolvePort(Number(match[1]));
    };
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with ${code} before listening:\n${output}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid!,
    startMs: performance.now() - started,
    output: () => output,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}
