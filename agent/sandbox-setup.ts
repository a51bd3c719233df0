import { chmodSync, mkdirSync, realpathSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Cgroup, type Limits } from './cgroups.ts';
import type { LocalAgentOptions } from './local-agent.ts';
import { storedPackages } from './package-store.ts';
import type { Sandboxed } from './processes.ts';
import { SANDBOX_AGENT_MODULES, SANDBOX_CACHE_DIR, SANDBOX_HOME, SANDBOX_NODE_DIR, SANDBOX_PATH, sharedReadOnly } from './sandbox.ts';
import { sandboxResolvConf } from './sandbox-network.ts';
import { giveFolderTo, giveTo } from './sandbox-user.ts';
import type { ServerPaths } from './server-command.ts';

/** What the sandbox of a deployment's commands is made of (the options the agent was started with). */
export type SandboxOptions = Pick<
  LocalAgentOptions,
  'workDir' | 'sandbox' | 'bwrapPath' | 'sandboxUser' | 'egress' | 'pastaPath' | 'limits' | 'env' | 'passEnv' | 'cacheDir'
>;

/**
 * What each command run for a deployment sees: its sandbox (binds, network, cgroup), its
 * environment, and the folders the agent makes for it (the package managers' cache, the server's
 * state and socket folders), owned by the sandbox user where there is one.
 */
export class SandboxSetup {
  readonly #o: SandboxOptions;

  constructor(options: SandboxOptions) {
    this.#o = options;
  }

  /** The folder of a sandboxed server's socket: empty, the sandbox user's, nobody else's. */
  socketFolder(dir: string): string {
    rmSync(dir, { recursive: true, force: true });
    // Its parent is passed through (0711) by bwrap, which runs as the sandbox user, to bind it.
    mkdirSync(dirname(dir), { recursive: true, mode: 0o711 });
    chmodSync(dirname(dir), 0o711);
    mkdirSync(dir, { mode: 0o700 });
    giveFolderTo(this.#o.sandboxUser, dir);
    return dir;
  }

  /**
   * The deployment's state folder (the agent server's own persistence, `.langgraph_api`), kept
   * across revisions and restarts and removed with the deployment. In the sandbox it is bound over
   * the checkout's `.langgraph_api`; unsandboxed, that path is a link to it.
   */
  stateFolder(deploymentId: string, cwd: string): string {
    return this.#deploymentFolderIn(cwd, '.langgraph_api', join(this.#o.workDir, deploymentId, 'state'));
  }

  /**
   * The deployment's own Node compile cache (docs/decisions/local-agent-server-start.md): what its
   * servers compiled, kept across revisions so the next one starts warm; nobody else's server
   * reads or writes it, and it goes with the deployment. It appears in the checkout as the state
   * folder does, at `COMPILE_CACHE_IN_CHECKOUT`: Node's portable cache keys modules by their path
   * relative to it, which is the same in every revision's checkout.
   */
  compileCacheFolder(deploymentId: string, cwd: string): string {
    return this.#deploymentFolderIn(cwd, COMPILE_CACHE_IN_CHECKOUT, join(this.#o.workDir, deploymentId, 'compile-cache'));
  }

  /**
   * A folder of the deployment (`folder`) that a server sees at `name` in its checkout: in the
   * sandbox bound there (an empty folder made for the bind), unsandboxed a link to it.
   */
  #deploymentFolderIn(cwd: string, name: string, folder: string): string {
    mkdirSync(folder, { recursive: true });
    if (this.sandboxed()) giveTo(this.#o.sandboxUser, folder);
    const inCheckout = join(cwd, name);
    // Whatever the checkout has there (a file, a link planted by the repository) gives way.
    rmSync(inCheckout, { recursive: true, force: true });
    if (this.#o.sandbox === 'none') symlinkSync(folder, inCheckout);
    else {
      mkdirSync(inCheckout);
      giveFolderTo(this.#o.sandboxUser, inCheckout);
    }
    return folder;
  }

  /**
   * What a command for the checkout `buildDir` sees, or null unsandboxed: its checkout
   * read-write; with `stateDir` (the agent server) its deployment's state folder, else (install and
   * build) the package managers' cache, read-write; the agent's Node and node_modules read-only.
   */
  sandboxFor(
    deploymentId: string,
    buildDir: string,
    cwd: string,
    server: { stateDir: string; socketDir: string; compileCacheDir: string } | null,
    packages: { deploymentId: string; key: string } | null = null,
    cgroup: Cgroup | null = null,
  ): Sandboxed | null {
    if (!this.sandboxed() || !this.#o.bwrapPath) return null;
    const writable = server
      ? [
          { from: server.stateDir, to: join(cwd, '.langgraph_api') },
          { from: server.socketDir, to: SANDBOX_SOCKET_DIR },
          { from: server.compileCacheDir, to: join(cwd, COMPILE_CACHE_IN_CHECKOUT) },
        ]
      : [{ from: this.cacheDir(deploymentId), to: SANDBOX_CACHE_DIR }];
    const readOnly = sharedReadOnly(agentModules());
    if (server) readOnly.push({ from: RELAY, to: SANDBOX_RELAY }, { from: SERVER_PRELOAD, to: SANDBOX_SERVER_PRELOAD });
    const stored = packages ? storedPackages(this.#o.workDir, packages.deploymentId, packages.key) : null;
    if (stored) readOnly.push({ from: stored, to: join(cwd, 'node_modules') });
    const egress = this.#o.egress;
    return {
      bwrap: this.#o.bwrapPath,
      spec: {
        checkout: buildDir,
        cwd,
        writable,
        readOnly,
        dieWithAgent: server === null,
        user: this.#o.sandboxUser,
        network: {
          policy: egress,
          pasta: this.#o.pastaPath,
          resolvConf: egress.mode === 'public' ? sandboxResolvConf(this.#o.workDir) : null,
        },
        limits: cgroup && this.#o.limits ? { cgroup, tmpMb: this.#o.limits.tmpMb, fileMb: this.#o.limits.diskMb } : null,
      },
    };
  }

  /** A cgroup for one command, with `limits` (made now; the command joins it as it starts). */
  cgroup(name: string, limits: Limits): Cgroup | null {
    return this.#o.limits ? new Cgroup(this.#o.limits.cgroups, name, limits) : null;
  }

  sandboxed(): boolean {
    return this.#o.sandbox === 'bwrap';
  }

  /**
   * The deployment's own package managers' cache: its installs write only there (a shared cache
   * one install could write would let it plant packages for every other deployment).
   */
  cacheDir(deploymentId: string): string {
    const dir = this.#o.cacheDir ? join(resolve(this.#o.cacheDir), deploymentId) : join(this.#o.workDir, deploymentId, 'cache');
    // Its parent is passed through (0711) by bwrap, which runs as the sandbox user, to bind it.
    mkdirSync(dirname(dir), { recursive: true, mode: 0o711 });
    if (this.#o.cacheDir) chmodSync(dirname(dir), 0o711);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    giveFolderTo(this.#o.sandboxUser, dir);
    return dir;
  }

  /** Where the server command finds Node and the agent's own LangGraph packages. */
  serverPaths(): ServerPaths {
    const modules = agentModules();
    if (this.#o.sandbox === 'none') return { node: process.execPath, agentModules: modules ? { host: modules, seen: modules } : null, preload: SERVER_PRELOAD };
    return { node: `${SANDBOX_NODE_DIR}/node`, agentModules: modules ? { host: modules, seen: SANDBOX_AGENT_MODULES } : null, preload: SANDBOX_SERVER_PRELOAD };
  }

  /** What every sandboxed command starts from: PATH, a home of its own, a locale, and the system's certificates for Node. */
  #baseEnv(): Record<string, string> {
    return { PATH: SANDBOX_PATH, HOME: SANDBOX_HOME, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', NODE_USE_SYSTEM_CA: '1' };
  }

  /** Install and build: no secrets; the package managers' caches, and the operator variables named with --pass-env. */
  buildEnv(): NodeJS.ProcessEnv {
    if (this.#o.sandbox === 'none') return this.unsandboxedEnv();
    const cache = SANDBOX_CACHE_DIR;
    const env: Record<string, string> = {
      ...this.#baseEnv(),
      npm_config_cache: `${cache}/npm`,
      npm_config_update_notifier: 'false',
      ...NPM_FETCH_RETRIES,
      YARN_CACHE_FOLDER: `${cache}/yarn`,
      // pnpm keeps its store under PNPM_HOME (<cache>/pnpm/store); an npm_config_store_dir would make npm warn in every build log.
      PNPM_HOME: `${cache}/pnpm`,
      BUN_INSTALL_CACHE_DIR: `${cache}/bun`,
      PIP_CACHE_DIR: `${cache}/pip`,
      UV_CACHE_DIR: `${cache}/uv`,
    };
    for (const name of this.#o.passEnv) {
      const value = this.#o.env[name];
      if (value !== undefined) env[name] = value;
    }
    return env;
  }

  /** The agent server: nothing of the operator's environment (its secrets are added by the caller). */
  serverEnv(): NodeJS.ProcessEnv {
    return { ...this.#baseEnv(), NODE_ENV: 'production', LOG_JSON: 'true', LOG_LEVEL: 'info' };
  }

  /**
   * Where a server started in `cwd` keeps what Node compiled: the deployment's compile cache, as it
   * appears in the checkout. With `stored` (the lock file's stored packages, bound read-only at
   * its node_modules), where its preload keeps the packages' own resolutions too, in the same
   * folder, and what they belong to: the packages' key and the stored folder's identity (a store
   * made again for the same key starts its file anew).
   */
  compileCacheEnv(cwd: string, stored: { key: string; dir: string } | null = null): Record<string, string> {
    const cache = join(cwd, COMPILE_CACHE_IN_CHECKOUT);
    const env: Record<string, string> = { NODE_COMPILE_CACHE: cache, NODE_COMPILE_CACHE_PORTABLE: '1' };
    if (!stored) return env;
    try {
      env.AGENT_RESOLUTIONS_KEY = `${stored.key}.${statSync(stored.dir).ino}`;
      env.AGENT_RESOLUTIONS_FILE = join(cache, RESOLUTIONS_FILE);
    } catch {
      // The store is gone (pruned meanwhile): nothing to keep resolutions for.
    }
    return env;
  }

  /** `--sandbox none` and container engines: the agent's environment, its token removed, its own Node first on PATH. */
  unsandboxedEnv(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...this.#o.env, LOG_JSON: 'true', LOG_LEVEL: 'info' };
    delete env.CONTROL_PLANE_AGENT_TOKEN;
    env.PATH = `${dirname(process.execPath)}:${env.PATH ?? ''}`;
    return env;
  }

  /** git runs outside the sandbox (it runs no repository code on clone): the agent's environment without its token. */
  gitEnv(): NodeJS.ProcessEnv {
    const env = { ...this.#o.env };
    delete env.CONTROL_PLANE_AGENT_TOKEN;
    return env;
  }
}

/**
 * npm's fetch retries in every sandboxed install (npm_config_*, which yarn 1 and pnpm read too): a
 * registry read that fails or times out is tried 5 more times, waiting 2 s, then 4, 8, 16, 30 s
 * (npm's own defaults: 2 retries from 10 s), so a slow registry does not fail a build at once;
 * still within the build timeout. An operator's own values (--pass-env npm_config_fetch_retries…)
 * win: they are set after these.
 */
export const NPM_FETCH_RETRIES: Record<string, string> = {
  npm_config_fetch_retries: '5',
  npm_config_fetch_retry_factor: '2',
  npm_config_fetch_retry_mintimeout: '2000',
  npm_config_fetch_retry_maxtimeout: '30000',
};

/** Where a sandboxed server's socket folder is bound inside its sandbox. */
export const SANDBOX_SOCKET_DIR = '/run/agent-server';
/** The relay that serves a sandboxed server's port as that socket (sandbox-relay.mjs), and where the sandbox sees it. */
export const RELAY = fileURLToPath(new URL('./sandbox-relay.mjs', import.meta.url));
export const SANDBOX_RELAY = '/opt/agent/sandbox-relay.mjs';
/** What a JavaScript graph's server loads before the API server (server-preload.mjs), and where the sandbox sees it. */
export const SERVER_PRELOAD = fileURLToPath(new URL('./server-preload.mjs', import.meta.url));
export const SANDBOX_SERVER_PRELOAD = '/opt/agent/server-preload.mjs';
/** Where a deployment's compile cache appears in its checkout (the server's working folder). */
export const COMPILE_CACHE_IN_CHECKOUT = '.node-compile-cache';
/** The file in a deployment's compile cache where its servers' preload keeps the packages' resolutions (server-preload.mjs). */
export const RESOLUTIONS_FILE = 'resolutions.json';

/** The agent's own node_modules (where its LangGraph CLI and API server are), or null. */
export function agentModules(): string | null {
  try {
    const manifest = createRequire(import.meta.url).resolve('@langchain/langgraph-cli/package.json');
    return realpathSync(dirname(dirname(dirname(manifest))));
  } catch {
    return null;
  }
}
