import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processIdentity } from '../../agent/build-records.ts';

/**
 * How many package installs from the registry the test agents run at once on this machine,
 * whatever the number of vitest workers (TEST_INSTALL_SLOTS sets it). A sandboxed `npm ci`
 * downloads ~100 MB into its deployment's own empty cache through pasta, a user-space process;
 * three at once beside CPU-bound builds starved it until npm timed out reading from the registry.
 */
const SLOTS = Number(process.env.TEST_INSTALL_SLOTS ?? 2);
/** Shared by every test process of the machine (vitest workers are processes of their own). */
const SLOT_DIR = join(tmpdir(), 'cp-test-install-slots');
const WAIT_MS = 250;

type Holder = { pid: number; identity: string | null };

/** Whether the process that wrote the slot file still runs (pids are reused: its identity must match too). */
function held(file: string): boolean {
  try {
    const holder = JSON.parse(readFileSync(file, 'utf8')) as Holder;
    return processIdentity(holder.pid) === holder.identity;
  } catch {
    // Being written this instant (empty), or gone: not taken over until it can be read as dead.
    return readable(file) === '';
  }
}

function readable(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

type Slots = { dir: string; slots: number };

/** Takes a free slot (a file made with O_EXCL), or one whose holder died; null when all are held. */
function tryTake({ dir, slots }: Slots): string | null {
  mkdirSync(dir, { recursive: true });
  for (let slot = 0; slot < slots; slot += 1) {
    const file = join(dir, `slot-${slot}`);
    let fd: number;
    try {
      fd = openSync(file, 'wx');
    } catch {
      if (held(file)) continue;
      // A dead holder's slot: removed, then raced for like a free one.
      rmSync(file, { force: true });
      try {
        fd = openSync(file, 'wx');
      } catch {
        continue;
      }
    }
    writeSync(fd, JSON.stringify({ pid: process.pid, identity: processIdentity(process.pid) } satisfies Holder));
    closeSync(fd);
    return file;
  }
  return null;
}

/**
 * Runs `install` (a deployment whose agent downloads its packages, until its revision settles)
 * holding one of the machine's install slots (`slots`: another set, for the helper's own test),
 * waiting for one first. A test killed while
 * holding one leaves a file whose holder is dead: the next taker removes it.
 */
export async function withInstallSlot<T>(install: () => Promise<T>, slots: Slots = { dir: SLOT_DIR, slots: SLOTS }): Promise<T> {
  let slot = tryTake(slots);
  while (!slot) {
    await new Promise((resolve) => setTimeout(resolve, WAIT_MS));
    slot = tryTake(slots);
  }
  try {
    return await install();
  } finally {
    rmSync(slot, { force: true });
  }
}
