import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bundleAction, DIST_FILE } from '../../action/build.ts';
import { ACTION_DOC, ACTION_YML, renderActionDoc } from '../../action/docs.ts';

// CI fails when a committed, generated file no longer matches its sources.
describe('generated files are up to date', () => {
  it('action/dist/index.js is the bundle of the current sources (run `npm run build:action`)', async () => {
    const fresh = join(mkdtempSync(join(tmpdir(), 'action-dist-')), 'index.js');
    await bundleAction(fresh);
    const committed = readFileSync(DIST_FILE, 'utf8');
    const rebuilt = readFileSync(fresh, 'utf8');
    // A boolean, so a mismatch does not print two megabytes.
    expect(rebuilt.length === committed.length && rebuilt === committed, 'action/dist/index.js is out of date: run `npm run build:action` and commit it').toBe(
      true,
    );
  });

  it('docs/action.md has the inputs and outputs of action.yml (run `npm run docs:action`)', () => {
    const doc = readFileSync(ACTION_DOC, 'utf8');
    expect(renderActionDoc(readFileSync(ACTION_YML, 'utf8'), doc), 'docs/action.md is out of date: run `npm run docs:action`').toBe(doc);
  });
});
