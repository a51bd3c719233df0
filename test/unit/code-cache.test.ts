import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cacheFileContent, v8DataIn } from '../../server/code-cache.ts';

// server/code-cache.ts reads a cache file's copy of the script a part at a time (256 KB) to compare it
// with the script: a difference in any part, not only the first, must refuse the file.
const folder = mkdtempSync(join(tmpdir(), 'code-cache-test-'));
afterAll(() => rmSync(folder, { recursive: true, force: true }));

/** V8's data as `v8DataIn` reads it from a file holding `content`. */
function readBack(script: Buffer, content: Buffer): Buffer | undefined {
  const path = join(folder, 'cache.v8');
  writeFileSync(path, content);
  const fd = openSync(path, 'r');
  try {
    return v8DataIn(fd, script);
  } finally {
    closeSync(fd);
  }
}

describe('the code cache file (server/code-cache.ts)', () => {
  // A script of 2.5 parts (ASCII, as the build makes it), and V8's data.
  const script = Buffer.from('x'.repeat(640 * 1024), 'latin1');
  for (let i = 0; i < script.length; i += 97) script[i] = 0x61 + (i % 26);
  const v8Data = Buffer.from('not really V8 data, but bytes to give back as they were written');
  const content = cacheFileContent(script, v8Data);

  it('gives back V8 data of a file made for this very script', () => {
    expect(readBack(script, content)?.equals(v8Data)).toBe(true);
  });

  it('refuses a file whose copy of the script differs in any part, or whose length or end differ', () => {
    for (const at of [0, 256 * 1024 - 1, 256 * 1024, 600 * 1024, script.length - 1]) {
      const changed = Buffer.from(content);
      changed[4 + at] = changed[4 + at]! ^ 0x20;
      expect(readBack(script, changed), `a byte changed at ${at}`).toBeUndefined();
    }
    // The same script one byte longer (its copy's length then differs).
    expect(readBack(Buffer.concat([script, Buffer.from('y')]), content)).toBeUndefined();
    // Cut short: in the copy, or right after it (no V8 data).
    expect(readBack(script, content.subarray(0, 300 * 1024))).toBeUndefined();
    expect(readBack(script, content.subarray(0, 4 + script.length))).toBeUndefined();
    expect(readBack(script, Buffer.alloc(0))).toBeUndefined();
  });
});
