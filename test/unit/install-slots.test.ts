import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { withInstallSlot } from '../helpers/install-slots.ts';

/** The test agents' cross-process limit on installs: slot files in a folder of this test's own. */
describe('install slots', () => {
  it('lets at most `slots` holders run at once, and each waiter runs once a slot is free', async () => {
    const slots = { dir: mkdtempSync(join(tmpdir(), 'cp-slots-')), slots: 2 };
    let running = 0;
    let most = 0;
    const releases: Array<() => void> = [];
    const holders = Array.from({ length: 5 }, (_, i) =>
      withInstallSlot(async () => {
        running += 1;
        most = Math.max(most, running);
        await new Promise<void>((resolve) => releases.push(resolve));
        running -= 1;
        return i;
      }, slots),
    );
    // Release whoever holds a slot, one at a time, until all five have run.
    for (let released = 0; released < 5; released += 1) {
      while (releases.length === 0) await new Promise((r) => setTimeout(r, 20));
      expect(running).toBeLessThanOrEqual(2);
      releases.shift()!();
    }
    expect(await Promise.all(holders)).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
    expect(existsSync(join(slots.dir, 'slot-0'))).toBe(false);
  });

  it('takes over a slot whose holder died, and waits for one whose holder lives', async () => {
    const slots = { dir: mkdtempSync(join(tmpdir(), 'cp-slots-')), slots: 1 };
    mkdirSync(slots.dir, { recursive: true });
    // A holder that has exited: its pid names no process with its identity any more.
    const dead = spawnSync(process.execPath, ['-e', '0']);
    writeFileSync(join(slots.dir, 'slot-0'), JSON.stringify({ pid: dead.pid, identity: 'linux:gone:1' }));
    expect(await withInstallSlot(async () => 'ran', slots)).toBe('ran');

    // This process holds the only slot: a second taker waits until it is released.
    let release!: () => void;
    const first = withInstallSlot(() => new Promise<void>((resolve) => (release = resolve)), slots);
    let secondRan = false;
    const second = withInstallSlot(async () => {
      secondRan = true;
    }, slots);
    await new Promise((r) => setTimeout(r, 600));
    expect(secondRan).toBe(false);
    release();
    await Promise.all([first, second]);
    expect(secondRan).toBe(true);
  });
});
