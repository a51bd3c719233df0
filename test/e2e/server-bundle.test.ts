import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleServer } from '../../server/build.ts';
import { testBackendKind, testDatabaseUrl } from '../helpers/backends.ts';
import { type ListeningChild, ROOT, startListeningChild } from '../helpers/listening-child.ts';

/**
 * What `npm start` runs: the esbuild bundle of the server with its packages (server/build.ts), one
 * script run by its entry with a V8 code cache made after the start (server/bundle-entry.ts). The
 * other suites mostly run the same bundle; this one checks that it serves the same as the sources
 * (API, errors, the console and its files found from the script's folder) on this suite's backend,
 * and what the code cache does: made by a first start, read by the second, never read for a changed
 * script, made again when damaged, and never needed for the server to answer.
 */
describe('the server bundle (npm start)', () => {
  const outdir = mkdtempSync(join(ROOT, 'server', '.dist-test-'));
  const apiKey = `test-key-${randomBytes(12).toString('hex')}`;
  let env: Record<string, string>;
  let server: ListeningChild | undefined;

  const start = async (nodeArgs: readonly string[] = [], moreEnv: Record<string, string> = {}) => {
    server = await startListeningChild(join(outdir, 'main.js'), { ...env, ...moreEnv }, 30_000, nodeArgs);
    return server;
  };
  // What the entry did with the script's code cache, from its debug lines (NODE_DEBUG=code-cache):
  // 'accepted' (V8 took the file's code), 'none' (no file: compiled), 'rejected' (V8 refused the
  // file: compiled), or undefined (caching turned off); then whether it wrote a file.
  const traceCache = { NODE_DEBUG: 'code-cache' };
  const cacheUse = (output: string) => /CODE-CACHE \d+: \S+: (accepted|none|rejected)\n/.exec(output)?.[1];
  const cacheWrite = (output: string) => /CODE-CACHE \d+: \S+: (written|not written)/.exec(output)?.[1];
  const cacheFiles = (folder: string) => readdirSync(folder).map((name) => join(folder, name));
  const script = () => join(outdir, 'server.js');

  beforeAll(async () => {
    await bundleServer(outdir);
    const databaseUrl = await testDatabaseUrl(testBackendKind(), join(mkdtempSync(join(tmpdir(), 'cp-bundle-')), 'control-plane.db'));
    env = { DATABASE_URL: databaseUrl, BOOTSTRAP_API_KEY: apiKey, ENCRYPTION_KEY: randomBytes(32).toString('base64'), LOG_LEVEL: 'info' };
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(outdir, { recursive: true, force: true });
  });

  it('answers the API, its errors and the console, and a second start reads the code cache the first made after starting', async () => {
    const first = await start([], traceCache);
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);
    const headers = { 'x-api-key': apiKey, 'content-type': 'application/json' };
    const list = await fetch(`${first.url}/v2/deployments`, { headers });
    expect(list.status).toBe(200);
    expect(await list.json()).toEqual({ resources: [], offset: 0 });
    // A bad body gets the contract's error, from the bundled zod and Hono as from the sources.
    const bad = await fetch(`${first.url}/v2/deployments`, { method: 'POST', headers, body: '{bad' });
    expect(bad.status).toBe(422);
    expect(((await bad.json()) as { detail: Array<{ type: string }> }).detail[0]!.type).toBe('json_invalid');
    // A body zod refuses (the bundle keeps zod's English locale alone, server/build.ts).
    const invalid = await fetch(`${first.url}/v2/deployments`, { method: 'POST', headers, body: '{}' });
    expect(invalid.status).toBe(422);
    expect((await invalid.json()) as unknown).toEqual({ detail: [{ loc: ['body', 'source'], msg: 'Field required', type: 'missing' }] });
    const signIn = await fetch(`${first.url}/console/sign-in`);
    expect(signIn.status).toBe(200);
    expect(await signIn.text()).toContain('<title>Sign in');
    const css = await fetch(`${first.url}/console/assets/console.css`);
    expect(css.status).toBe(200);
    expect((await css.text()).length).toBeGreaterThan(100);
    expect(first.output()).toContain(testBackendKind() === 'postgres' ? 'postgres' : 'control-plane.db');
    await first.stop();
    // A new bundle: the first start compiles the script and writes its cache (a second after the
    // start, or at exit), beside the bundle; a second start runs the code it read from there.
    expect(cacheUse(first.output())).toBe('none');
    expect(cacheWrite(first.output())).toBe('written');
    const [file, ...others] = cacheFiles(join(outdir, 'compile-cache'));
    expect(others).toEqual([]);
    expect(statSync(file!).mode & 0o777).toBe(0o600);
    // Made after the start, the cache holds the functions the start ran, not only the top level
    // (what a cache made right after compiling, as Node's compile cache makes it, would hold). The
    // file: the script's length, the script, V8's data (server/code-cache.ts).
    const source = readFileSync(script());
    const topLevelOnly = new vm.Script(source.toString(), { filename: script() }).createCachedData().length;
    expect(statSync(file!).size - 4 - source.length).toBeGreaterThan(2 * topLevelOnly);
    const second = await start([], traceCache);
    expect((await fetch(`${second.url}/healthz`)).status).toBe(200);
    await second.stop();
    expect(cacheUse(second.output())).toBe('accepted');
    expect(cacheWrite(second.output())).toBeUndefined();
  });

  it('never runs a cache made for another script, and makes a damaged one again', async () => {
    const [file] = cacheFiles(join(outdir, 'compile-cache'));
    const original = readFileSync(script(), 'utf8');
    // The same length (all V8 itself checks), one message changed, after the build (so under the
    // same cache file's name): run from the old script's cache, the start would log the old message.
    const message = 'no GitHub App configured';
    const changed = original.replace(message, message.toUpperCase());
    expect(changed.length).toBe(original.length);
    expect(changed).not.toBe(original);
    try {
      writeFileSync(script(), changed);
      const edited = await start([], traceCache);
      expect((await fetch(`${edited.url}/healthz`)).status).toBe(200);
      await edited.stop();
      expect(cacheUse(edited.output())).toBe('none');
      expect(edited.output()).toContain(message.toUpperCase());
      expect(edited.output()).not.toContain(message);
    } finally {
      writeFileSync(script(), original);
    }
    // And back: the file now holds the edited script's code, which the original does not run.
    const restored = await start([], traceCache);
    await restored.stop();
    expect(cacheUse(restored.output())).toBe('none');
    expect(restored.output()).toContain(message);
    // V8's part of the file cut short (a damaged file): V8 refuses it, the script is compiled and the
    // file made again, which the next start reads.
    const content = readFileSync(file!);
    writeFileSync(file!, content.subarray(0, 4 + Buffer.byteLength(original) + 1000));
    const damaged = await start([], traceCache);
    expect((await fetch(`${damaged.url}/healthz`)).status).toBe(200);
    await damaged.stop();
    expect(cacheUse(damaged.output())).toBe('rejected');
    expect(cacheWrite(damaged.output())).toBe('written');
    const again = await start([], traceCache);
    await again.stop();
    expect(cacheUse(again.output())).toBe('accepted');
  });

  it('writes no cache for a start that failed, whose cache would hold little more than the configuration', async () => {
    const folder = join(outdir, 'compile-cache');
    for (const file of cacheFiles(folder)) rmSync(file);
    const refused = spawnSync(process.execPath, [join(outdir, 'main.js')], {
      env: { ...process.env, ...env, ...traceCache, PORT: 'not-a-port' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('Invalid configuration');
    expect(cacheUse(refused.stderr)).toBe('none');
    expect(cacheWrite(refused.stderr)).toBeUndefined();
    expect(cacheFiles(folder)).toEqual([]);
    // The next start that succeeds makes it.
    const started = await start([], traceCache);
    await started.stop();
    expect(cacheWrite(started.output())).toBe('written');
  });

  it("starts without the cache when its folder cannot be made, and leaves the operator's NODE_COMPILE_CACHE and NODE_DISABLE_COMPILE_CACHE alone", async () => {
    const folder = join(outdir, 'compile-cache');
    const operators = mkdtempSync(join(tmpdir(), 'cp-bundle-cache-'));
    // A file where the folder should be: no user can make the folder there, root included.
    rmSync(folder, { recursive: true });
    writeFileSync(folder, '');
    try {
      const unwritable = await start([], traceCache);
      expect((await fetch(`${unwritable.url}/healthz`)).status).toBe(200);
      await unwritable.stop();
      expect(cacheUse(unwritable.output())).toBe('none');
      expect(cacheWrite(unwritable.output())).toBe('not written');
      // The operator's folder is used instead of the bundle's (which could not be made anyway). Stopped
      // as soon as it says "listening": the stop is still a clean one, through Node's exit, where the
      // cache is written (server/main.ts, server/bundle-entry.ts).
      const chosen = await start([], { ...traceCache, NODE_COMPILE_CACHE: operators });
      await chosen.stop();
      expect(cacheUse(chosen.output())).toBe('none');
      expect(cacheWrite(chosen.output())).toBe('written');
      // (Node's own compile cache, which the variable turns on for the entry, has its folder there too.)
      expect(cacheFiles(operators).filter((path) => path.endsWith('.v8'))).toHaveLength(1);
    } finally {
      rmSync(folder);
      mkdirSync(folder);
      rmSync(operators, { recursive: true, force: true });
    }
    // Turned off: nothing read or written, though the bundle's folder can be written again.
    const disabled = await start([], { ...traceCache, NODE_DISABLE_COMPILE_CACHE: '1' });
    expect((await fetch(`${disabled.url}/healthz`)).status).toBe(200);
    await disabled.stop();
    expect(cacheUse(disabled.output())).toBeUndefined();
    expect(cacheWrite(disabled.output())).toBeUndefined();
    expect(cacheFiles(folder)).toEqual([]);
  });

  it("loads neither undici (Node's fetch), node:http2, readline, tls nor zlib to start and answer /healthz and the API", async () => {
    // Node's own modules loaded so far (process.moduleLoadList), written when the process gets SIGUSR2;
    // and the calls of util.getCallSites, which pino made at every `pino()` (server/build.ts,
    // pinoExportsOnUse): in the bundle each makes V8 scan the whole 2 MB script for its line ends.
    const report = [
      "const util = process.getBuiltinModule('node:util'); const getCallSites = util.getCallSites; let callSites = 0;",
      'util.getCallSites = (...args) => { callSites += 1; return getCallSites(...args); };',
      "process.on('SIGUSR2', () => process.stderr.write('call sites: ' + callSites + '\\nloaded: ' + JSON.stringify(process.moduleLoadList) + '\\n'));",
    ].join('\n');
    const child = await start(['--import', `data:text/javascript,${encodeURIComponent(report)}`]);
    const loadedNow = async (): Promise<string[]> => {
      const reports = child.output().split('loaded: ').length;
      process.kill(child.pid, 'SIGUSR2');
      while (child.output().split('loaded: ').length === reports) await new Promise((resolve) => setTimeout(resolve, 20));
      return JSON.parse(child.output().split('loaded: ').at(-1)!.split('\n')[0]!) as string[];
    };
    const heavy = (modules: string[]) => modules.filter((name) => /undici|http2|readline|tls|zlib/.test(name));
    const atStart = await loadedNow();
    // The check itself sees what it should: Node's http server is loaded by then.
    expect(atStart).toContain('NativeModule _http_server');
    expect(heavy(atStart)).toEqual([]);
    expect((await fetch(`${child.url}/healthz`)).status).toBe(200);
    expect(heavy(await loadedNow())).toEqual([]);
    expect(child.output().split('call sites: ').at(-1)!.split('\n')[0]).toBe('0');
    const list = await fetch(`${child.url}/v2/deployments`, { headers: { 'x-api-key': apiKey } });
    expect(list.status).toBe(200);
    expect(heavy(await loadedNow())).toEqual([]);
    // Nor a body read (from Node's stream, server/http/node-request.ts) and refused with the contract's error.
    const bad = await fetch(`${child.url}/v2/deployments`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(await bad.json()).toEqual({ detail: [{ loc: ['body', 'source'], msg: 'Field required', type: 'missing' }] });
    expect(heavy(await loadedNow())).toEqual([]);
    await child.stop();
  });

  it('keeps the script ASCII, with the rewrites that defer what a start does not need (docs/decisions/server-start.md)', () => {
    const text = readFileSync(script(), 'utf8');
    // prom-client's process CPU metric asks for OpenTelemetry's API when it is read, not when it is loaded.
    expect(text).toContain('node_modules/prom-client/lib/metrics/processCpuTotal.js');
    expect(text).toMatch(/OtelApi=\{get trace\(\)/);
    // pino takes its callers' script names only for a transport, not at every `pino()`.
    expect(text).toMatch(/normalize\d*\(instance,void 0,\.\.\.args\)/);
    // A built-in's shim exports an object inheriting the module (esbuild's `__toESM` then copies none of
    // its exports into a getter each, for every file that imports it).
    expect(text).toContain('var m=__require("node:crypto");module.exports=typeof m==="function"?m:Object.create(m)');
    // No `import()` left (a classic script has no module loader behind it): esbuild inlined each one,
    // Node's built-ins through `require`.
    expect(text).not.toMatch(/\bimport\(/);
    // ASCII only: one character outside it (esbuild cannot escape one in a tagged template's text, such
    // as the console's) makes V8 keep the whole script's source, for as long as the server runs, at two
    // bytes a character; the console writes HTML entities instead.
    expect(text.match(/[^\x00-\x7f].{0,40}/u)?.[0]).toBeUndefined();
  });
});
