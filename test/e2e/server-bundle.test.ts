import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleServer } from '../../server/build.ts';
import { testBackendKind, testDatabaseUrl } from '../helpers/backends.ts';
import { type ListeningChild, ROOT, startListeningChild } from '../helpers/listening-child.ts';

/**
 * What `npm start` runs: the esbuild bundle of the server with its packages (server/build.ts), split
 * at each `import()`, started from its entry with Node's compile cache. The other suites run the
 * TypeScript sources; this one checks that the bundle serves the same (API, errors, the console and
 * its files found beside the chunks) on this suite's backend, PostgreSQL's driver and backend being
 * a chunk loaded only for a postgres:// DATABASE_URL, and that a second start finds its compiled code.
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
  // What Node's compile cache did with the server's chunk, from Node's own debug lines
  // (NODE_DEBUG_NATIVE=COMPILE_CACHE): 'accepted' (read from the cache), 'not initialized' (compiled,
  // then written), or undefined (no cache at all).
  const traceCache = { NODE_DEBUG_NATIVE: 'COMPILE_CACHE' };
  const serverChunk = () => /import\("\.\/([\w-]+\.js)"\)/.exec(readFileSync(join(outdir, 'main.js'), 'utf8'))![1]!;
  const cacheOfServerChunk = (output: string) =>
    new RegExp(`code cache for ESM file://\\S+/${serverChunk().replace('.', '\\.')} was (accepted|not initialized|rejected)`).exec(output)?.[1];
  const cacheEntries = (folder: string) => readdirSync(folder, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).length;

  beforeAll(async () => {
    await bundleServer(outdir);
    const databaseUrl = await testDatabaseUrl(testBackendKind(), join(mkdtempSync(join(tmpdir(), 'cp-bundle-')), 'control-plane.db'));
    env = { DATABASE_URL: databaseUrl, BOOTSTRAP_API_KEY: apiKey, ENCRYPTION_KEY: randomBytes(32).toString('base64'), LOG_LEVEL: 'info' };
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(outdir, { recursive: true, force: true });
  });

  it('answers the API, its errors and the console, and a second start reads the compile cache', async () => {
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
    // A new bundle: the first start compiles the server's chunk; Node writes the cache when the
    // process exits, beside the bundle, and a second start reads the chunk's code from it.
    expect(cacheOfServerChunk(first.output())).toBe('not initialized');
    expect(cacheEntries(join(outdir, 'compile-cache'))).toBeGreaterThan(0);
    const second = await start([], traceCache);
    expect((await fetch(`${second.url}/healthz`)).status).toBe(200);
    expect(cacheOfServerChunk(second.output())).toBe('accepted');
    await second.stop();
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
      expect(unwritable.output()).toContain('Cannot create cache directory');
      expect(cacheOfServerChunk(unwritable.output())).toBeUndefined();
      // The operator's folder is used instead of the bundle's (which could not be made anyway). Stopped
      // as soon as it says "listening": the stop is still a clean one, through Node's exit, which
      // writes the cache (server/main.ts).
      const chosen = await start([], { ...traceCache, NODE_COMPILE_CACHE: operators });
      await chosen.stop();
      expect(cacheOfServerChunk(chosen.output())).toBe('not initialized');
      expect(cacheEntries(operators)).toBeGreaterThan(0);
    } finally {
      rmSync(folder);
      mkdirSync(folder);
      rmSync(operators, { recursive: true, force: true });
    }
    // Turned off: nothing read or written, though the bundle's folder can be written again.
    const disabled = await start([], { ...traceCache, NODE_DISABLE_COMPILE_CACHE: '1' });
    expect((await fetch(`${disabled.url}/healthz`)).status).toBe(200);
    await disabled.stop();
    expect(cacheOfServerChunk(disabled.output())).toBeUndefined();
    expect(cacheEntries(folder)).toBe(0);
  });

  it("loads neither undici (Node's fetch), node:http2, readline, tls nor zlib to start and answer /healthz and the API", async () => {
    // Node's own modules loaded so far (process.moduleLoadList), written when the process gets SIGUSR2.
    const report = `process.on('SIGUSR2', () => process.stderr.write('loaded: ' + JSON.stringify(process.moduleLoadList) + '\\n'))`;
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

  it('leaves what a start does not need out of the chunks it loads (docs/decisions/server-start.md)', () => {
    const text = (chunk: string) => readFileSync(join(outdir, chunk), 'utf8');
    // The entry imports the server's chunk; what that chunk imports statically is loaded at every start.
    const loaded = new Set<string>();
    const follow = (chunk: string) => {
      if (loaded.has(chunk)) return;
      loaded.add(chunk);
      for (const [, imported] of text(chunk).matchAll(/(?:from|import)\s*"\.\/([\w-]+\.js)"/g)) follow(imported!);
    };
    follow(serverChunk());
    const atStart = [...loaded].map(text).join('\n');
    // Loaded on first use: PostgreSQL's driver, tar-stream (an upload's tarball), OpenTelemetry's SDK.
    for (const onFirstUse of ['node_modules/pg/', 'node_modules/tar-stream/', 'node_modules/@opentelemetry/sdk-trace-base/']) {
      expect(atStart).not.toContain(onFirstUse);
    }
    // prom-client's process CPU metric asks for OpenTelemetry's API when it is read, not when it is loaded.
    expect(atStart).toContain('node_modules/prom-client/lib/metrics/processCpuTotal.js');
    expect(atStart).toMatch(/OtelApi=\{get trace\(\)/);
    // ASCII only: one character outside it (esbuild cannot escape one in a tagged template's text, such
    // as the console's) makes V8 keep the whole chunk's source, for as long as the server runs, at two
    // bytes a character; the console writes HTML entities instead.
    for (const chunk of loaded) expect(text(chunk).match(/[^\x00-\x7f].{0,40}/u)?.[0], chunk).toBeUndefined();
  });
});
