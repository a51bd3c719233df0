import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

/** Kills a whole process group (the command and everything it started), TERM first, then KILL. */
export function killGroup(pid: number, graceMs = 3000): Promise<void> {
  const alive = () => {
    try {
      process.kill(-pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  try {
    process.kill(-pid, 'SIGTERM');
  } catch {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const started = Date.now();
    const check = setInterval(() => {
      if (!alive()) {
        clearInterval(check);
        resolve();
      } else if (Date.now() - started > graceMs) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
        clearInterval(check);
        resolve();
      }
    }, 50);
  });
}

/** Starts `sh -c command` in its own process group, each output line to `onLine`. */
export function startCommand(command: string, options: { cwd: string; env: NodeJS.ProcessEnv; onLine: (line: string, stream: 'stdout' | 'stderr') => void }): ChildProcess {
  const child = spawn('sh', ['-c', command], { cwd: options.cwd, env: options.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  createInterface({ input: child.stdout! }).on('line', (line) => options.onLine(line, 'stdout'));
  createInterface({ input: child.stderr! }).on('line', (line) => options.onLine(line, 'stderr'));
  return child;
}

export type CommandResult = { code: number | null; signal: string | null; lastLines: string[]; aborted: boolean };

/**
 * Runs a command to its end, every line to `onLine`; `signal` kills its whole process group (an
 * interrupted build leaves nothing running). Keeps the last lines for a failure's status message.
 */
export function runCommand(
  command: string,
  options: { cwd: string; env: NodeJS.ProcessEnv; signal: AbortSignal; onLine: (line: string, stream: 'stdout' | 'stderr') => void },
): Promise<CommandResult> {
  const lastLines: string[] = [];
  return new Promise((resolve, reject) => {
    if (options.signal.aborted) return resolve({ code: null, signal: null, lastLines, aborted: true });
    const child = startCommand(command, {
      cwd: options.cwd,
      env: options.env,
      onLine: (line, stream) => {
        lastLines.push(line);
        if (lastLines.length > 20) lastLines.shift();
        options.onLine(line, stream);
      },
    });
    const onAbort = () => {
      if (child.pid) void killGroup(child.pid);
    };
    options.signal.addEventListener('abort', onAbort, { once: true });
    child.on('error', (error) => {
      options.signal.removeEventListener('abort', onAbort);
      reject(error);
    });
    child.on('close', (code, signal) => {
      options.signal.removeEventListener('abort', onAbort);
      resolve({ code, signal, lastLines, aborted: options.signal.aborted });
    });
  });
}
