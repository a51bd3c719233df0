import { appendFileSync, readFileSync } from 'node:fs';
import { afterAll, expect } from 'vitest';

/**
 * With TEST_CPU_LOG=<file>, each test file appends one JSON line to it: its CPU (user and system,
 * the worker's own and its reaped child processes', servers, agents and builds) and wall time, in
 * ms, and the server processes it started. CPU holds on a loaded machine where wall time does not:
 * it is how the slow files are found.
 * Read from /proc/self/stat (Linux), whose child times Node's resourceUsage does not give.
 */
const LOG = process.env.TEST_CPU_LOG;
/** The count test/helpers/server-process.ts keeps (the same key; not imported, so a file that starts no server loads none of it). */
const SERVER_STARTS = Symbol.for('cp-test-server-starts');
const serverStarts = () => (globalThis as { [SERVER_STARTS]?: number })[SERVER_STARTS] ?? 0;

/** utime, stime, cutime, cstime of this process, in ms. */
function times(): number[] {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // Fields after the command name (which may hold spaces), from field 3 (state).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const tick = 1000 / 100;
  return [11, 12, 13, 14].map((index) => Number(fields[index]) * tick);
}

if (LOG) {
  const start = times();
  const startServers = serverStarts();
  const startWall = performance.now();
  afterAll(() => {
    const [user, system, childUser, childSystem] = times().map((ms, index) => ms - start[index]!);
    const file = expect.getState().testPath ?? '';
    const line = {
      file: file.slice(file.indexOf('/test/') + 1),
      project: process.env.TEST_BACKEND ?? 'sqlite',
      cpuMs: user! + system! + childUser! + childSystem!,
      user,
      system,
      childUser,
      childSystem,
      wallMs: Math.round(performance.now() - startWall),
      serverStarts: serverStarts() - startServers,
    };
    appendFileSync(LOG, `${JSON.stringify(line)}\n`);
  });
}
