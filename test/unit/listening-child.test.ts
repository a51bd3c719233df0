import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/api.ts';
import { startListeningChild } from '../helpers/listening-child.ts';

/** The pids of the processes whose command line names `script` (Linux's /proc). */
function processesRunning(script: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(script);
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('a child process that never says it is listening', () => {
  it('is killed when its start deadline passes, not left running after the refusal', async () => {
    const script = join(mkdtempSync(join(tmpdir(), 'cp-listening-child-')), 'silent.mjs');
    writeFileSync(script, 'setInterval(() => {}, 1000);\n');
    const started = startListeningChild(script, {}, 2_000);
    // Spawned: its command line names the script from the start, before Node runs any of it.
    expect(processesRunning(script)).toHaveLength(1);
    await expect(started).rejects.toThrow(/did not start in time \(2000 ms\)/);
    await eventually(async () => (processesRunning(script).length === 0 ? true : undefined), 10_000);
  });
});
