import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMPILE_CACHE_IN_CHECKOUT, RESOLUTIONS_FILE, SandboxSetup } from '../../agent/sandbox-setup.ts';
import { bwrapSetupOptions } from '../helpers/sandbox-options.ts';

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
function run(root: string, withPreload: boolean, env: Record<string, string> = {}): unknown {
  const payload = JSON.stringify({ cwd: root, graphs: { agent: './graph.mjs:graph' } });
  const args = [...(withPreload ? ['--import', PRELOAD] : []), join(root, 'main.mjs'), payload];
  return JSON.parse(execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', env: { PATH: process.env.PATH, ...env } }));
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

/** A checkout whose packages import each other (and a builtin), and whose graph imports them and a file of its own. */
const PACKAGES = {
  'package.json': '{"name":"app","type":"module"}',
  'node_modules/dep/package.json': '{"name":"dep","type":"module","exports":"./index.js"}',
  'node_modules/dep/index.js':
    "import { sep } from 'node:path'; import inner from './inner.js'; import leaf from 'leaf'; export default [inner, leaf, sep].join(' ');",
  'node_modules/dep/inner.js': "export default 'dep/inner';",
  'node_modules/leaf/package.json': '{"name":"leaf","type":"module","exports":"./leaf.js"}',
  'node_modules/leaf/leaf.js': "export default 'leaf';",
  'node_modules/leaf/other.js': "export default 'the other leaf';",
  'own.mjs': "export default 'own';",
  'graph.mjs': 'export const graph = {};',
  'main.mjs': "import dep from 'dep'; import own from './own.mjs'; console.log(JSON.stringify({ dep, own }));",
};
const ANSWER = { dep: 'dep/inner leaf /', own: 'own' };

type Kept = { key: string; entries: Array<[string, string, string, string, string | null]> };

describe("the agent server's preload, across starts", () => {
  it('keeps the resolutions made inside node_modules, relative to the server folder, and a later start in another checkout uses them', () => {
    const cache = mkdtempSync(join(tmpdir(), 'cp-resolutions-'));
    const file = join(cache, RESOLUTIONS_FILE);
    const env = { AGENT_RESOLUTIONS_FILE: file, AGENT_RESOLUTIONS_KEY: 'lock-1' };
    const first = tree(PACKAGES);
    expect(run(first, true, env)).toEqual(ANSWER);
    const kept = JSON.parse(readFileSync(file, 'utf8')) as Kept;
    expect(kept.key).toBe('lock-1');
    // The packages' imports of each other and of the builtin; nothing imported from the checkout's
    // own files (main.mjs's `dep` and `./own.mjs`), and no path of this checkout.
    expect(kept.entries.map(([specifier, folder, , url]) => [specifier, folder, url]).sort()).toEqual([
      ['./inner.js', 'node_modules/dep/', 'node_modules/dep/inner.js'],
      ['leaf', 'node_modules/dep/', 'node_modules/leaf/leaf.js'],
      ['node:path', 'node_modules/dep/', 'node:path'],
    ]);
    expect(readFileSync(file, 'utf8')).not.toContain(first);

    // The next revision (another checkout) with the same packages learns nothing new: the file is not written again.
    const next = tree(PACKAGES);
    const written = statSync(file).mtimeMs;
    expect(run(next, true, env)).toEqual(ANSWER);
    expect(statSync(file).mtimeMs).toBe(written);

    // It is the file that answers: an entry changed in it is what the next start loads.
    const changed: Kept = { ...kept, entries: kept.entries.map((e) => (e[0] === 'leaf' ? [e[0], e[1], e[2], 'node_modules/leaf/other.js', e[4]] : e)) };
    writeFileSync(file, JSON.stringify(changed));
    expect(run(tree(PACKAGES), true, env)).toEqual({ ...ANSWER, dep: 'dep/inner the other leaf /' });
  });

  it('ignores what was kept for other packages (another key), and entries that leave node_modules', () => {
    const cache = mkdtempSync(join(tmpdir(), 'cp-resolutions-'));
    const file = join(cache, RESOLUTIONS_FILE);
    const root = tree(PACKAGES);
    const rest = 'node,import,module-sync,node-addons\0';
    const misleading = [['leaf', 'node_modules/dep/', rest, 'node_modules/leaf/other.js', 'module']];
    writeFileSync(file, JSON.stringify({ key: 'lock-0', entries: misleading }));
    expect(run(root, true, { AGENT_RESOLUTIONS_FILE: file, AGENT_RESOLUTIONS_KEY: 'lock-1' })).toEqual(ANSWER);
    // Rewritten for the packages it has now.
    expect((JSON.parse(readFileSync(file, 'utf8')) as Kept).key).toBe('lock-1');
    // Answers outside node_modules (the checkout's own files, another folder) are not taken from the file.
    writeFileSync(file, JSON.stringify({ key: 'lock-1', entries: [['leaf', 'node_modules/dep/', rest, 'own.mjs', 'module']] }));
    expect(run(root, true, { AGENT_RESOLUTIONS_FILE: file, AGENT_RESOLUTIONS_KEY: 'lock-1' })).toEqual(ANSWER);
    // Not a file of resolutions at all: started as without one.
    writeFileSync(file, 'not json');
    expect(run(root, true, { AGENT_RESOLUTIONS_FILE: file, AGENT_RESOLUTIONS_KEY: 'lock-1' })).toEqual(ANSWER);
  });

  it("is told a file in the deployment's own compile cache, keyed by the stored packages it binds, and none without them", () => {
    const workDir = mkdtempSync(join(tmpdir(), 'cp-resolutions-env-'));
    const setup = new SandboxSetup(bwrapSetupOptions(workDir));
    const cwd = join(workDir, 'deployment', 'revision');
    const stored = join(workDir, 'deployment', 'packages', 'key-1', 'node_modules');
    mkdirSync(stored, { recursive: true });
    const env = setup.compileCacheEnv(cwd, { key: 'key-1', dir: stored });
    // Inside the folder bound over the checkout's compile cache: the deployment's own, which no other deployment's sandbox has.
    expect(env.AGENT_RESOLUTIONS_FILE).toBe(join(cwd, COMPILE_CACHE_IN_CHECKOUT, RESOLUTIONS_FILE));
    expect(env.AGENT_RESOLUTIONS_KEY).toBe(`key-1.${statSync(stored).ino}`);
    // The same key stored again (another folder): another key, so nothing kept for the old one is used.
    const again = join(workDir, 'deployment', 'packages', 'key-1', 'again');
    cpSync(stored, again, { recursive: true });
    expect(setup.compileCacheEnv(cwd, { key: 'key-1', dir: again }).AGENT_RESOLUTIONS_KEY).not.toBe(env.AGENT_RESOLUTIONS_KEY);
    // Packages installed in the checkout itself (no store): nothing to keep.
    expect(setup.compileCacheEnv(cwd)).not.toHaveProperty('AGENT_RESOLUTIONS_FILE');
  });
});
