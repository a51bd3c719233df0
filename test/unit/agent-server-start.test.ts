import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { GraphConfig } from '../../agent/graph-config.ts';
import { agentModules, COMPILE_CACHE_IN_CHECKOUT, SANDBOX_SERVER_PRELOAD, SandboxSetup, SERVER_PRELOAD } from '../../agent/sandbox-setup.ts';
import { productionServerCommand } from '../../agent/server-command.ts';
import { bwrapSetupOptions } from '../helpers/sandbox-options.ts';

const modules = agentModules();
const API = '@langchain/langgraph-cli/node_modules/@langchain/langgraph-api';
const config = (graph: string): GraphConfig => ({ language: 'javascript', graphs: ['agent'], server: { graphs: { agent: graph } } });

/**
 * What makes a redeploy's server start fast (docs/decisions/local-agent-server-start.md): the
 * agent's own preload in place of the API server's where that one is known, and each deployment's
 * own Node compile cache, seen at the same place in every revision's checkout and by no other
 * deployment.
 */
describe.skipIf(!modules)('the agent server’s start', () => {
  const workDir = mkdtempSync(join(tmpdir(), 'cp-server-start-'));
  afterAll(() => rmSync(workDir, { recursive: true, force: true }));
  const paths = { node: '/opt/node/bin/node', agentModules: { host: modules!, seen: '/opt/agent/node_modules' }, preload: SANDBOX_SERVER_PRELOAD };

  it('loads the agent’s preload for a JavaScript graph on the known API server', () => {
    const command = productionServerCommand('/srv/app', config('./src/graph.mjs:graph'), 8000, paths)!;
    expect(command).toContain(`--import 'file://${SANDBOX_SERVER_PRELOAD}'`);
    expect(command).not.toContain('dist/preload.mjs');
  });

  it('keeps the API server’s own preload for a TypeScript graph (tsx’s hooks beside it) and without the agent’s', () => {
    const typescript = productionServerCommand('/srv/app', config('./src/graph.ts:graph'), 8000, paths)!;
    expect(typescript).toContain(`--import 'file:///opt/agent/node_modules/${API}/dist/preload.mjs'`);
    expect(typescript).not.toContain(SANDBOX_SERVER_PRELOAD);
    const without = productionServerCommand('/srv/app', config('./src/graph.mjs:graph'), 8000, { ...paths, preload: null })!;
    expect(without).toContain('dist/preload.mjs');
  });

  it('keeps the API server’s own preload when it is not one the agent knows (another version’s)', () => {
    const own = join(workDir, 'checkout');
    const api = join(own, 'node_modules/@langchain/langgraph-api');
    mkdirSync(join(api, 'dist/cli'), { recursive: true });
    cpSync(join(modules!, API, 'dist/preload.mjs'), join(api, 'dist/preload.mjs'));
    cpSync(join(modules!, API, 'dist/graph'), join(api, 'dist/graph'), { recursive: true });
    writeFileSync(join(api, 'dist/cli/entrypoint.mjs'), '');
    // The known pair: the agent's preload.
    expect(productionServerCommand(own, config('./g.mjs:graph'), 8000, paths)).toContain(SANDBOX_SERVER_PRELOAD);
    // A resolve hook that does something else: the package's own.
    writeFileSync(join(api, 'dist/graph/load.hooks.mjs'), 'export async function resolve(s, c, next) { return next(s, c); }\n');
    const command = productionServerCommand(own, config('./g.mjs:graph'), 8000, paths)!;
    expect(command).toContain(`--import 'file://${own}/node_modules/@langchain/langgraph-api/dist/preload.mjs'`);
    expect(command).not.toContain(SANDBOX_SERVER_PRELOAD);
  });

  it('binds each deployment’s own compile cache at one place in its checkout, and the preload read-only', () => {
    const setup = new SandboxSetup(bwrapSetupOptions(workDir));
    const serverSandbox = (deploymentId: string, revisionId: string) => {
      const cwd = join(workDir, deploymentId, revisionId);
      mkdirSync(cwd, { recursive: true });
      const compileCacheDir = setup.compileCacheFolder(deploymentId, cwd);
      const stateDir = setup.stateFolder(deploymentId, cwd);
      const socketDir = setup.socketFolder(join(workDir, '.s', revisionId));
      return { cwd, compileCacheDir, spec: setup.sandboxFor(deploymentId, cwd, cwd, { stateDir, socketDir, compileCacheDir })!.spec };
    };
    const [a, b] = [crypto.randomUUID(), crypto.randomUUID()];
    const first = serverSandbox(a, crypto.randomUUID());
    const next = serverSandbox(a, crypto.randomUUID());
    const other = serverSandbox(b, crypto.randomUUID());
    // The same folder for every revision of the deployment, and none of another deployment's.
    expect(next.compileCacheDir).toBe(first.compileCacheDir);
    expect(other.compileCacheDir).not.toBe(first.compileCacheDir);
    expect(first.spec.writable).toContainEqual({ from: first.compileCacheDir, to: join(first.cwd, COMPILE_CACHE_IN_CHECKOUT) });
    expect(next.spec.writable).toContainEqual({ from: first.compileCacheDir, to: join(next.cwd, COMPILE_CACHE_IN_CHECKOUT) });
    const bound = (spec: typeof first.spec) => [...spec.writable, ...spec.readOnly].map((bind) => bind.from);
    expect(bound(other.spec).some((from) => from.includes(a))).toBe(false);
    expect(other.spec.readOnly).toContainEqual({ from: SERVER_PRELOAD, to: SANDBOX_SERVER_PRELOAD });
    // The server is told where it is, and to key it by paths relative to it (the same in every checkout).
    expect(setup.compileCacheEnv(next.cwd)).toEqual({ NODE_COMPILE_CACHE: join(next.cwd, COMPILE_CACHE_IN_CHECKOUT), NODE_COMPILE_CACHE_PORTABLE: '1' });
  });
});
