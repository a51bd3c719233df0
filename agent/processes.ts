import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { type SandboxSpec, sandboxCommand } from './sandbox.ts';

/** Runs a command inside a bubblewrap sandbox: the bwrap binary and what the sandbox holds. */
export type Sandboxed = { bwrap: string; spec: SandboxSpec };

/**
 * Process groups of the commands and servers this agent started and that still run. Each runs
 * detached (its own group, so an interrupt reaches everything it started), which also means it
 * would outlive the agent: whatever is left is killed when the agent's process exits, however it
 * exits (a second Ctrl-C, an uncaught error), as server/git/ls-remote.ts does for git.
 */
const groups = new Set<number>();
let exitHookInstalled = false;
function killGroupsOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const pgid of groups) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
}

/**
 * Leaves a group running when the agent exits: a live agent server, which its successor takes
 * over. Installs, builds and servers still starting stay killed at exit.
 */
export function untrackGroup(pgid: number): void {
  groups.delete(pgid);
}

/** The process groups this agent started that still run (for tests and diagnostics). */
export function trackedGroups(): number[] {
  return [...groups];
}

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
    groups.delete(pid);
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const started = Date.now();
    const check = setInterval(() => {
      if (!alive()) {
        groups.delete(pid);
        clearInterval(check);
        resolve();
      } else if (Date.now() - started > graceMs) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
        groups.delete(pid);
        clearInterval(check);
        resolve();
      }
    }, 50);
  });
}

/**
 * Starts `sh -c command` in its own process group (a new session with no terminal), each output
 * line to `onLine`; with `sandbox`, inside bwrap, which is then the group leader. Only the three
 * standard streams are passed: no other descriptor of the agent reaches the command.
 * `outputFile`: the output is appended to that file instead of piped (`onLine` is then not
 * called: the caller follows the file), and the process is not killed when the agent exits, so
 * it can outlive a restart of the agent.
 */
export function startCommand(
  command: string,
  options: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    onLine: (line: string, stream: 'stdout' | 'stderr') => void;
    sandbox?: Sandboxed | null;
    outputFile?: string;
  },
): ChildProcess {
  const [file, args, cwd] = options.sandbox
    ? [...sandboxCommand(options.sandbox.bwrap, options.sandbox.spec, closingDescriptors(command)), '/']
    : ['sh', ['-c', command], options.cwd];
  const output = options.outputFile ? openSync(options.outputFile, 'a') : null;
  let child: ChildProcess;
  try {
    child = spawn(file, args, { cwd, env: options.env, detached: true, stdio: output === null ? ['ignore', 'pipe', 'pipe'] : ['ignore', output, output] });
  } finally {
    if (output !== null) closeSync(output);
  }
  if (child.pid !== undefined) {
    const pgid = child.pid;
    killGroupsOnExit();
    groups.add(pgid);
    // The group leader (the command, or the server `exec`ed by sh) ended: its group id may be
    // reused by an unrelated process later, so it is not killed at exit.
    child.once('exit', () => groups.delete(pgid));
  }
  if (output === null) {
    splitLines(child.stdout!, (line) => options.onLine(line, 'stdout'));
    splitLines(child.stderr!, (line) => options.onLine(line, 'stderr'));
  }
  return child;
}

/**
 * The command line that runs `command` in the sandbox after closing every descriptor but the
 * three standard streams: the agent may have inherited open descriptors without close-on-exec
 * (from a shell or a supervisor), which every process it starts would inherit too, and Node can
 * neither tell them from its own nor keep a child from getting them. bash closes descriptors of
 * any number (sh only up to 9).
 */
export function closingDescriptors(command: string): string[] {
  const close = 'for fd in $(ls /proc/self/fd); do [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null; done; exec sh -c "$1"';
  return existsSync('/bin/bash') ? ['/bin/bash', '-c', close, 'sandbox', command] : ['sh', '-c', command];
}

/** Characters of one output line the agent holds at most; the rest of the line is skipped. */
export const MAX_HELD_LINE = 16 * 1024;

/**
 * Calls `onLine` for each line of `stream`, holding at most `max` characters of a line: a command
 * printing hundreds of megabytes without a newline costs the agent `max` characters, not the line
 * (readline would hold all of it). A cut line ends with a note saying so.
 */
export function splitLines(stream: Readable, onLine: (line: string) => void, max = MAX_HELD_LINE): void {
  const decoder = new StringDecoder('utf8');
  let held = '';
  let skipped = 0;
  const emit = (text: string) => {
    onLine(skipped > 0 ? `${text}… [line cut by the agent: ${skipped} more characters]` : text);
    skipped = 0;
  };
  const take = (text: string) => {
    let start = 0;
    for (;;) {
      const newline = text.indexOf('\n', start);
      const piece = newline === -1 ? text.slice(start) : text.slice(start, newline);
      const room = max - held.length;
      if (piece.length > room) {
        held += piece.slice(0, Math.max(0, room));
        skipped += piece.length - Math.max(0, room);
      } else {
        held += piece;
      }
      if (newline === -1) return;
      emit(held.endsWith('\r') ? held.slice(0, -1) : held);
      held = '';
      start = newline + 1;
    }
  };
  stream.on('data', (chunk: Buffer) => take(decoder.write(chunk)));
  stream.on('end', () => {
    take(decoder.end());
    if (held.length > 0 || skipped > 0) emit(held);
    held = '';
  });
}

export type CommandResult = {
  code: number | null;
  signal: string | null;
  lastLines: string[];
  aborted: boolean;
  /** The limit that ended it (its timeout, or what `watch` said), as a status message names it. */
  limit: string | null;
};

/**
 * Runs a command to its end, every line to `onLine`; `signal` kills its whole process group (an
 * interrupted build leaves nothing running). Keeps the last lines for a failure's status message.
 */
export function runCommand(
  command: string,
  options: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    signal: AbortSignal;
    onLine: (line: string, stream: 'stdout' | 'stderr') => void;
    sandbox?: Sandboxed | null;
    /** Ends the command after this long; the result's `limit` says so with `timeoutMessage`. */
    timeout?: { ms: number; message: string };
    /** Asked every `everyMs` while the command runs: a message ends the command (a limit it went past). */
    watch?: { everyMs: number; check: () => Promise<string | null> };
  },
): Promise<CommandResult> {
  const lastLines: string[] = [];
  let limit: string | null = null;
  return new Promise((resolve, reject) => {
    if (options.signal.aborted) return resolve({ code: null, signal: null, lastLines, aborted: true, limit });
    const child = startCommand(command, {
      cwd: options.cwd,
      env: options.env,
      sandbox: options.sandbox,
      onLine: (line, stream) => {
        lastLines.push(line);
        if (lastLines.length > 20) lastLines.shift();
        options.onLine(line, stream);
      },
    });
    const onAbort = () => {
      if (child.pid) void killGroup(child.pid);
    };
    const endFor = (message: string) => {
      limit ??= message;
      onAbort();
    };
    const timer = options.timeout ? setTimeout(() => endFor(options.timeout!.message), options.timeout.ms) : null;
    let watching = false;
    const watcher = options.watch
      ? setInterval(() => {
          if (watching) return;
          watching = true;
          options.watch!.check().then(
            (message) => {
              watching = false;
              if (message) endFor(message);
            },
            () => (watching = false),
          );
        }, options.watch.everyMs)
      : null;
    const cleanUp = () => {
      options.signal.removeEventListener('abort', onAbort);
      if (timer) clearTimeout(timer);
      if (watcher) clearInterval(watcher);
    };
    options.signal.addEventListener('abort', onAbort, { once: true });
    child.on('error', (error) => {
      cleanUp();
      reject(error);
    });
    child.on('close', (code, signal) => {
      cleanUp();
      resolve({ code, signal, lastLines, aborted: options.signal.aborted, limit });
    });
  });
}
