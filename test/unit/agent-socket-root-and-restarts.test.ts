import { mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_RESTARTS, RESTART_WINDOW_MS, RestartBudget } from '../../agent/server-restarts.ts';
import { MAX_SOCKET_ROOT, makeSocketRoot, socketRootOf } from '../../agent/socket-root.ts';

describe('the socket root of a work directory', () => {
  it('is the work directory when short, else one short folder per real path, made for the agent alone', () => {
    const base = mkdtempSync(join(tmpdir(), 'cp-sockroot-'));
    const short = join(base, 'w');
    expect(socketRootOf(short)).toBe(short);
    const long = join(base, 'a'.repeat(MAX_SOCKET_ROOT));
    mkdirSync(long);
    const root = makeSocketRoot(long, 0o700);
    try {
      expect(root).toMatch(/\/acp-[0-9a-f]{12}$/);
      expect(Buffer.byteLength(root)).toBeLessThanOrEqual(MAX_SOCKET_ROOT);
      expect(statSync(root).mode & 0o777).toBe(0o700);
      // The same folder through a link to it: derived from the real path.
      const link = join(base, `${'b'.repeat(MAX_SOCKET_ROOT)}-link`);
      symlinkSync(long, link);
      expect(socketRootOf(link)).toBe(root);
      expect(makeSocketRoot(long, 0o711)).toBe(root);
      expect(statSync(root).mode & 0o777).toBe(0o711);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
    // Something not the agent's own folder there first (a link planted in the shared temporary directory): refused.
    const planted = join(base, 'c'.repeat(MAX_SOCKET_ROOT));
    mkdirSync(planted);
    const target = socketRootOf(planted);
    symlinkSync(base, target);
    try {
      expect(() => makeSocketRoot(planted, 0o700)).toThrow(/is not a folder of the agent's own user/);
    } finally {
      rmSync(target, { force: true });
      rmSync(base, { recursive: true, force: true });
    }
  });
});

describe('the restarts of a live server', () => {
  it('allows 3 in 10 minutes, and counts only the exits within the window', () => {
    const budget = new RestartBudget();
    expect([budget.exit(0), budget.exit(1000), budget.exit(2000)]).toEqual([1, 2, 3]);
    expect(budget.exit(3000)).toBeNull();
    const spaced = new RestartBudget();
    for (let i = 0; i < 10; i += 1) expect(spaced.exit(i * (RESTART_WINDOW_MS + 1))).toBe(1);
    expect(MAX_RESTARTS).toBe(3);
  });
});
