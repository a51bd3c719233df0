import { appendFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ServerLogTail } from '../../agent/server-log-tail.ts';

describe("following an agent server's output file", () => {
  it('reads a line when the server writes it, not on the next poll (each line is stamped when it was printed)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'cp-tail-')), 'server.log');
    writeFileSync(file, '');
    const lines: string[] = [];
    let seen: (line: string) => void = () => undefined;
    // A poll an hour apart: only the file's change event can bring the lines in this test.
    const tail = new ServerLogTail(
      file,
      (line) => {
        lines.push(line);
        seen(line);
      },
      { intervalMs: 3_600_000 },
    );
    try {
      const next = () => new Promise<string>((resolve) => (seen = resolve));
      let arriving = next();
      appendFileSync(file, '{"level":"info","event":"Starting server..."}\n');
      expect(await arriving).toBe('{"level":"info","event":"Starting server..."}');
      arriving = next();
      appendFileSync(file, 'half a line, ');
      appendFileSync(file, 'then its end\n');
      expect(await arriving).toBe('half a line, then its end');
      expect(lines).toHaveLength(2);
    } finally {
      tail.stop();
    }
  });
});
