import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

const PRELOAD = new URL('../../agent/server-preload.mjs', import.meta.url).pathname;

/** A tree of files (path → text) under a new temporary folder; answers the folder. */
function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'cp-preload-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}

/**
 * What `main.mjs` in `root` prints, run by Node as the agent runs the API server: with the agent's
 * preload (`--import`) and the server's payload as the last argument; or without the preload.
 */
function run(root: string, withPreload: boolean): unknown {
  const payload = JSON.stringify({ cwd: root, graphs: { agent: './graph.mjs:graph' } });
  const args = [...(withPreload ? ['--import', PRELOAD] : []), join(root, 'main.mjs'), payload];
  return JSON.parse(execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8' }));
}

describe("the agent server's preload", () => {
  it('resolves every import as Node does, where the same specifier means another file by folder, by import or require, and by package scope', () => {
    // Each pair imports the same specifier from a different place and must get a different module:
    // a resolution remembered by anything less than (specifier, folder, conditions) mixes them up.
    const root = tree({
      'package.json': '{"name":"app","type":"module","imports":{"#which":"./which-app.mjs"}}',
      'which-app.mjs': "export default 'app #which';",
      'a/name.mjs': "export default 'a/name';",
      'a/one.mjs': "import name from './name.mjs'; export default name;",
      'a/two.mjs': "import name from './name.mjs'; export default name;",
      'b/name.mjs': "export default 'b/name';",
      'b/one.mjs': "import name from './name.mjs'; export default name;",
      'node_modules/dual/package.json': '{"name":"dual","exports":{".":{"import":"./esm.mjs","require":"./cjs.cjs"}}}',
      'node_modules/dual/esm.mjs': "export default 'dual as import';",
      'node_modules/dual/cjs.cjs': "module.exports = 'dual as require';",
      'node_modules/dual/node_modules/inner/package.json': '{"name":"inner","main":"index.js"}',
      'node_modules/dual/node_modules/inner/index.js': "module.exports = 'the inner dual sees';",
      'node_modules/inner/package.json': '{"name":"inner","main":"index.js"}',
      'node_modules/inner/index.js': "module.exports = 'the inner app sees';",
      'node_modules/dual/which.cjs': "module.exports = require('inner');",
      'node_modules/scoped/package.json': '{"name":"scoped","type":"module","imports":{"#which":"./which-scoped.mjs"},"exports":"./index.mjs"}',
      'node_modules/scoped/which-scoped.mjs': "export default 'scoped #which';",
      'node_modules/scoped/index.mjs': "export { default } from '#which';",
      'graph.mjs': 'export const graph = {};',
      'main.mjs': `
        import { createRequire } from 'node:module';
        import a1 from './a/one.mjs';
        import a2 from './a/two.mjs';
        import b1 from './b/one.mjs';
        import dualImport from 'dual';
        import appWhich from '#which';
        import scopedWhich from 'scoped';
        const require = createRequire(import.meta.url);
        const dualRequire = require('dual');
        const innerApp = require('inner');
        const innerDual = require('./node_modules/dual/which.cjs');
        console.log(JSON.stringify({ a1, a2, b1, dualImport, dualRequire, appWhich, scopedWhich, innerApp, innerDual }));
      `,
    });
    const expected = {
      a1: 'a/name',
      a2: 'a/name',
      b1: 'b/name',
      dualImport: 'dual as import',
      dualRequire: 'dual as require',
      appWhich: 'app #which',
      scopedWhich: 'scoped #which',
      innerApp: 'the inner app sees',
      innerDual: 'the inner dual sees',
    };
    expect(run(root, false)).toEqual(expected);
    expect(run(root, true)).toEqual(expected);
  });

  it('still fails an import that does not resolve, as Node does', () => {
    const root = tree({
      'package.json': '{"type":"module"}',
      'graph.mjs': 'export const graph = {};',
      'main.mjs': `
        let first;
        try { await import('./missing.mjs'); } catch (error) { first = error.code; }
        let again;
        try { await import('./missing.mjs'); } catch (error) { again = error.code; }
        console.log(JSON.stringify({ first, again }));
      `,
    });
    expect(run(root, true)).toEqual({ first: 'ERR_MODULE_NOT_FOUND', again: 'ERR_MODULE_NOT_FOUND' });
  });
});
