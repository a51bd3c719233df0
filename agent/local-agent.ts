import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { deploymentUrl, dnsSafeName } from '../shared/dns-safe-name.ts';
import type { WorkDeployment, WorkItem, WorkRevision } from '../shared/schemas/agent.ts';
import { withResourceSpecDefaults } from '../shared/schemas/resource-spec.ts';
import type { RevisionStatus } from '../shared/schemas/revision.ts';
import { adoptAgentServer, endOrphan, type RunningAgentServer, type ServerChannel, startAgentServer } from './agent-server.ts';
import { builtRecord, isBuilt, markBuilt, removeBuild, socketDirOf } from './build-records.ts';
import { Cgroup, type Limits } from './cgroups.ts';
import { AgentClient, WorkGone } from './client.ts';
import { detectInstallCommand } from './detect.ts';
import { Aborted, checkoutSource, quote } from './git.ts';
import { type GraphConfig, readGraphConfigInside } from './graph-config.ts';
import { type AgentLimits, diskUsage, LIMITS_NONE_WARNING, spaceLimit } from './limits.ts';
import { LogStream } from './log-stream.ts';
import { packagesKey, prunePackages, storedPackages, storePackages } from './package-store.ts';
import { runCommand, type Sandboxed } from './processes.ts';
import { ProxyClient } from './proxy-client.ts';
import { type RuntimeLogOptions, RuntimeLogShipper } from './runtime-logs.ts';
import {
  NONE_WARNING,
  SANDBOX_AGENT_MODULES,
  SANDBOX_CACHE_DIR,
  SANDBOX_HOME,
  SANDBOX_NODE_DIR,
  SANDBOX_PATH,
  type SandboxMode,
  sharedReadOnly,
} from './sandbox.ts';
import { type EgressPolicy, sandboxResolvConf } from './sandbox-network.ts';
import { folderBarringUser, giveFolderTo, giveTo, type SandboxUser } from './sandbox-user.ts';
import type { ServerPaths } from './server-command.ts';
import type { ServerLine } from './server-output.ts';
import { MAX_RESTARTS, RESTART_WINDOW_MS, RestartBudget } from './server-restarts.ts';
import { makeSocketRoot } from './socket-root.ts';
import { downloadTarball, hoistSingleDirectory, onControlPlane, unpackTarball } from './tarball.ts';
import { type AgentTracing, commandFailure, NO_TRACING } from './tracing.ts';
import { upstreamKey } from './upstream.ts';

const run = promisify(execFile);

export type LocalAgentOptions = {
  url: string;
  token: string;
  listenerId: string;
  agentId: string;
  version: string;
  workDir: string;
  proxyPort: number;
  proxyHost: string;
  capacity: number;
  startTimeoutMs: number;
  /** The agent's own environment: the values of `passEnv` come from it (and, with `--sandbox none`, everything). */
  env: NodeJS.ProcessEnv;
  /** `bwrap`: every command for a deployment runs in a bubblewrap sandbox (`bwrapPath`); `none`: unsandboxed, on purpose. */
  sandbox: SandboxMode;
  bwrapPath: string | null;
  /** The host user sandboxes run as when the agent is root (never root itself); null: the agent's own user. */
  sandboxUser: SandboxUser | null;
  /** Each sandbox's network: a namespace of its own, with egress to public addresses through pasta (`pastaPath`), or none. */
  egress: EgressPolicy;
  pastaPath: string | null;
  /** Resource limits of every sandboxed command; null: `--limits none` (warned in every build log). */
  limits: AgentLimits | null;
  /** Operator variables install and build commands get (a private registry's token): names only, values from `env`. */
  passEnv: string[];
  /** Where each deployment's package managers' cache is made, `<cache-dir>/<deployment id>` (default `<work-dir>/<deployment id>/cache`). */
  cacheDir?: string;
  /** `--public`: deployments answer without a key; otherwise `X-Api-Key` is checked with the control plane, answers kept `keyCacheMs` (≤ 30 s). */
  public: boolean;
  keyCacheMs: number;
  /** The URL template deployments are served under (`{name}`: the name's DNS-safe form); default `http://{name}.localhost:<proxy port>`. */
  publicUrl?: string;
  /** How much of a live server's output is shipped as runtime logs (rate, queue bound). */
  runtimeLogs?: Partial<RuntimeLogOptions>;
  print: (line: string) => void;
  /** Spans of install, build and start, when OTEL_EXPORTER_OTLP_ENDPOINT is set; none by default. */
  tracing?: AgentTracing;
};

/** A failure that ends the revision (as opposed to the work being taken away). */
class StageFailure extends Error {
  override readonly name = 'StageFailure';
}

type Live = { revisionId: string; server: RunningAgentServer; hosts: string[]; buildDir: string; runtimeLogs: RuntimeLogShipper | null };

/**
 * The `local` listener agent: pulls work of its listener, builds `github` revisions (real git) and
 * `internal_source` ones (the uploaded tarball) in a work directory with the package manager,
 * runs the LangGraph agent server of each live revision, and routes `<deployment host>` to it
 * through its reverse proxy.
 */
export class LocalAgent {
  readonly #options: LocalAgentOptions;
  readonly #client: AgentClient;
  readonly #proxy: ProxyClient;
  readonly #live = new Map<string, Live>();
  readonly #running = new Set<Promise<void>>();
  /** The attempt on each revision still running here: a new claim of it waits for the old one to end (and clean up). */
  readonly #attempts = new Map<string, Promise<void>>();
  readonly #stopping = new AbortController();
  #heartbeat: NodeJS.Timeout | null = null;
  #leaseMs = 30_000;
  /** The URL template this agent reports (set at start): what its deploy logs name, never the server's placeholder. */
  #publicUrl = '';
  #loop: Promise<void> | null = null;
  #starting: Promise<unknown> | null = null;

  constructor(options: LocalAgentOptions) {
    this.#options = { ...options, workDir: resolve(options.workDir) };
    this.#proxy = new ProxyClient(this.#options.workDir);
    this.#client = new AgentClient(options);
  }

  /**
   * Starts the proxy, says hello, restarts the live revisions' servers, then pulls work. `stop()`
   * may come at any point of it (a signal while servers are being restored, which can take the
   * start timeout per deployment): the start then ends early with `Aborted`, leaving nothing running.
   */
  start(): Promise<{ proxyPort: number }> {
    const starting = this.#start();
    this.#starting = starting;
    return starting;
  }

  async #start(): Promise<{ proxyPort: number }> {
    const signal = this.#stopping.signal;
    const checkStopping = () => {
      if (signal.aborted) throw new Aborted('the agent is stopping');
    };
    // Builds, records and deployments' state live here: owner-only, whatever the umask (the
    // sandboxed commands run as the agent's own user, so they still reach what is bound for them).
    // With a sandbox user, bwrap (run as that user) must pass through it to bind a deployment's
    // folders: traversable, not listable (0711); each deployment's own folders are the user's.
    const folderMode = this.#sandboxed() && this.#options.sandboxUser ? 0o711 : 0o700;
    // Its missing parents (the default ./data of ./data/agent) as any folder is made: the sandbox
    // user's bwrap must pass through them to bind a deployment's folders.
    mkdirSync(dirname(this.#options.workDir), { recursive: true });
    mkdirSync(this.#options.workDir, { recursive: true, mode: 0o700 });
    chmodSync(this.#options.workDir, folderMode);
    // The proxy's control socket and the servers' sockets: in the work directory, or (when that is
    // too long for a socket's path) in a short folder standing for it, passed through the same way.
    const socketRoot = makeSocketRoot(this.#options.workDir, folderMode);
    if (socketRoot !== this.#options.workDir) this.#options.print(`agent: the work directory is too long for unix sockets; they live in ${socketRoot}`);
    const sandboxUser = this.#sandboxed() ? this.#options.sandboxUser : null;
    if (sandboxUser) {
      // What every sandbox binds: the work directory, the agent's Node and packages, the relay.
      for (const path of [this.#options.workDir, RELAY, ...sharedReadOnly(agentModules()).map((bind) => bind.from)]) {
        const barring = folderBarringUser(path, sandboxUser);
        if (barring)
          throw new Error(
            `the sandbox user ${sandboxUser.name} cannot pass through ${barring} to reach ${path}, which every sandbox binds (bwrap runs as that user): let it search that folder (chmod o+x ${barring}), or keep the agent and its --work-dir where it can (under /opt, /srv or /var/lib, say)`,
          );
      }
    }
    // The proxy runs as a process of its own and outlives a restart of the agent: it keeps the
    // routes the previous agent gave until this one has restored (adopted or restarted) every
    // live server, then gets the whole table at once. The heartbeat comes after, so the control
    // plane hears from this agent (showing its deployments READY) once its proxy serves them.
    const proxyPort = await this.#proxy.listen(this.#options.proxyPort, this.#options.proxyHost);
    this.#options.print(`agent: proxy listening on http://${this.#options.proxyHost}:${proxyPort}`);
    await this.#proxy.checkKeys(
      this.#options.public ? { public: true } : { url: this.#options.url, token: this.#options.token, ttlMs: this.#options.keyCacheMs },
    );
    checkStopping();
    await this.#restore();
    checkStopping();
    await this.#proxy.publish();
    const publicUrl = this.#options.publicUrl ?? defaultPublicUrl(this.#options.proxyHost, proxyPort);
    this.#publicUrl = publicUrl;
    this.#options.print(`agent: deployments answer at ${publicUrl}`);
    const ack = await this.#client.heartbeat(this.#options.agentId, this.#options.version, this.#options.capacity, publicUrl, signal);
    checkStopping();
    this.#leaseMs = ack.lease_ms;
    this.#heartbeat = setInterval(
      () => {
        this.#client
          .heartbeat(this.#options.agentId, this.#options.version, this.#options.capacity, publicUrl)
          .catch((error: unknown) => this.#options.print(`agent: heartbeat failed: ${String(error)}`));
      },
      Math.max(100, Math.floor(this.#leaseMs / 3)),
    );
    this.#loop = this.#pull();
    this.#options.print(`agent: serving listener ${this.#options.listenerId} as ${this.#options.agentId}`);
    return { proxyPort };
  }

  /**
   * Stops pulling and gives back claims in progress (their installs and builds end). Then either
   * stops every server it runs and its proxy (`leaveServing` false), or leaves them serving: the
   * proxy process and the live agent servers outlive the agent, and the agent started next on the
   * same work directory takes them over, so a restart fails no request. Works in the middle of
   * `start()` too (servers not yet serving are stopped either way).
   */
  async stop(options: { leaveServing?: boolean } = {}): Promise<void> {
    this.#stopping.abort();
    await this.#starting?.catch(() => undefined);
    if (this.#heartbeat) clearInterval(this.#heartbeat);
    await Promise.allSettled([...this.#running]);
    await this.#loop?.catch(() => undefined);
    if (options.leaveServing) this.#options.print(`agent: leaving the proxy and ${this.#live.size} live server(s) serving for the next agent`);
    await Promise.allSettled(
      [...this.#live.values()].map(async (live) => {
        if (options.leaveServing) live.server.detach();
        else await live.server.stop();
        await live.runtimeLogs?.stop();
      }),
    );
    this.#live.clear();
    await this.#proxy.close(!options.leaveServing);
  }

  async #pull(): Promise<void> {
    const signal = this.#stopping.signal;
    while (!signal.aborted) {
      if (this.#running.size >= this.#options.capacity) {
        await Promise.race(this.#running);
        continue;
      }
      let work: WorkItem | null = null;
      try {
        work = await this.#client.claim(this.#options.agentId, 20, signal);
      } catch (error) {
        if (signal.aborted) return;
        this.#options.print(`agent: claim failed: ${String(error)}`);
        // A stop during the pause ends it at once (the retry used to sleep through it).
        await sleep(1000, signal);
        continue;
      }
      if (!work) continue;
      const task = this.#handle(work).catch((error: unknown) => this.#options.print(`agent: work failed unexpectedly: ${String(error)}`));
      const tracked: Promise<void> = task.finally(() => this.#running.delete(tracked));
      this.#running.add(tracked);
    }
  }

  /** Carries one claim: renews its lease while it works; a lost lease or an interrupt aborts it. */
  async #handle(work: WorkItem): Promise<void> {
    const gone = new AbortController();
    const onStop = () => gone.abort(new Aborted('the agent is stopping'));
    this.#stopping.signal.addEventListener('abort', onStop, { once: true });
    const renew = setInterval(
      () => {
        this.#client.renew(work.claim_id).catch((error: unknown) => {
          if (error instanceof WorkGone) gone.abort(error);
        });
      },
      Math.max(100, Math.floor(work.lease_ms / 3)),
    );
    try {
      if (work.kind === 'teardown') await this.#teardown(work.deployment, work.claim_id);
      else await this.#afterEarlierAttempt(work.revision.id, () => this.#carryRevision(work.deployment, work.revision, work.claim_id, gone));
    } finally {
      clearInterval(renew);
      this.#stopping.signal.removeEventListener('abort', onStop);
      if (this.#stopping.signal.aborted) await this.#client.release(work.claim_id).catch(() => undefined);
    }
  }

  /**
   * Runs `attempt` once this agent's earlier attempt on the same revision has ended. A claim whose
   * lease lapsed here (a slow renewal on a loaded machine) can come back to this same agent while
   * the lapsed attempt is still stopping; both use the revision's build directory, and the lapsed
   * one's clean-up would delete the checkout the new one is cloning into.
   */
  async #afterEarlierAttempt(revisionId: string, attempt: () => Promise<void>): Promise<void> {
    const earlier = this.#attempts.get(revisionId);
    const current = (async () => {
      await earlier?.catch(() => undefined);
      await attempt();
    })();
    this.#attempts.set(revisionId, current);
    try {
      await current;
    } finally {
      if (this.#attempts.get(revisionId) === current) this.#attempts.delete(revisionId);
    }
  }

  async #carryRevision(deployment: WorkDeployment, revision: WorkRevision, claimId: string, gone: AbortController): Promise<void> {
    const logs = new LogStream(this.#client, claimId, (error) => {
      if (error instanceof WorkGone) gone.abort(error);
    });
    let status: RevisionStatus = revision.status;
    const move = async (to: RevisionStatus, extra: { status_message?: string; repo_commit_sha?: string } = {}) => {
      await logs.flush();
      await this.#client.transition(claimId, { from: status, to, ...extra });
      status = to;
    };
    const buildDir = join(this.#options.workDir, deployment.id, revision.id);
    if (status === 'BUILDING' || status === 'DEPLOYING') {
      // Claimed in the middle of a stage: the agent that held it stopped (killed, or its lease lapsed).
      logs.line(
        status === 'BUILDING' ? 'build' : 'deploy',
        `an earlier attempt at this revision was lost while ${status} (its agent stopped or lost its lease); local agent ${this.#options.agentId} starts it again`,
        'warn',
      );
    }
    try {
      if (revision.source.type === 'image') {
        await this.#runImage(deployment, revision, revision.source.image_uri, buildDir, logs, move, () => status, gone.signal);
        return;
      }
      if (status === 'AWAITING_BUILD') await move('BUILDING');
      if (status === 'BUILDING') {
        const sha = await this.#build(deployment, revision, buildDir, logs, 'build', gone.signal);
        // An uploaded tarball has no commit: repo_commit_sha stays null.
        await move('AWAITING_DEPLOY', sha ? { repo_commit_sha: sha } : {});
      }
      if (status === 'AWAITING_DEPLOY') await move('DEPLOYING');
      if (status === 'DEPLOYING') {
        if (!isBuilt(buildDir)) {
          // Built by an agent that is gone (its lease lapsed after the build): build again here.
          logs.line('deploy', `local agent ${this.#options.agentId}: the build of this revision is not on this machine; building it again`);
          await this.#build(deployment, revision, buildDir, logs, 'deploy', gone.signal);
        }
        await this.#deploy(deployment, revision, buildDir, logs, move, gone.signal);
      }
    } catch (error) {
      if (gone.signal.aborted || error instanceof WorkGone || error instanceof Aborted) {
        this.#options.print(`agent: stopped work on revision ${revision.id}: ${String(gone.signal.reason ?? error)}`);
        if (![...this.#live.values()].some((live) => live.buildDir === buildDir)) removeBuild(buildDir);
        return;
      }
      const message = error instanceof Error ? error.message : String(error);
      const failed: RevisionStatus = status === 'AWAITING_BUILD' || status === 'BUILDING' ? 'BUILD_FAILED' : 'DEPLOY_FAILED';
      logs.line(failed === 'BUILD_FAILED' ? 'build' : 'deploy', message, 'error');
      await move(failed, { status_message: message.slice(0, 4000) }).catch((e: unknown) =>
        this.#options.print(`agent: could not report ${failed}: ${String(e)}`),
      );
      if (![...this.#live.values()].some((live) => live.buildDir === buildDir)) removeBuild(buildDir);
    } finally {
      await logs.flush();
    }
  }

  /**
   * Fetches the source (the commit of a `github` revision, or the uploaded tarball of an
   * `internal_source` one) and runs install and build from the graph config's directory;
   * answers the commit built, null for a tarball.
   */
  async #build(
    deployment: WorkDeployment,
    revision: WorkRevision,
    buildDir: string,
    logs: LogStream,
    type: 'build' | 'deploy',
    signal: AbortSignal,
  ): Promise<string | null> {
    // The checkout starts empty and the record of a finished build goes with it: a build that
    // dies half-way (a crash mid-install) is never taken for a finished one.
    removeBuild(buildDir);
    mkdirSync(dirname(buildDir), { recursive: true });
    const source = revision.source;
    let sha: string | null = null;
    if (source.type === 'git') {
      logs.line(type, `local agent ${this.#options.agentId}: fetching ${source.repo_url} at ${source.commit_sha ?? source.ref ?? 'its default branch'}`);
      try {
        sha = await checkoutSource(source, buildDir, { env: this.#gitEnv(), signal, onLine: (line) => logs.line(type, line) });
      } catch (error) {
        if (error instanceof Aborted) throw error;
        throw new StageFailure(`Could not fetch the repository: ${(error as Error).message}`);
      }
      logs.line(type, `checked out commit ${sha}`);
    } else if (source.type === 'tarball') {
      await this.#unpackUpload(source.url, buildDir, revision.graph_config_path ?? 'langgraph.json', logs, type, signal);
    } else {
      throw new StageFailure('Only git sources and uploaded tarballs are built here.');
    }
    const configRelative = revision.graph_config_path ?? 'langgraph.json';
    let config: GraphConfig;
    try {
      config = readGraphConfigInside(buildDir, configRelative);
    } catch (error) {
      const where = sha ? `the repository at commit ${sha}` : 'the uploaded tarball';
      throw new StageFailure(`${(error as Error).message} (${where})`);
    }
    if (config.language === 'python' && !(await answers('langgraph', ['--help']))) {
      throw new StageFailure(
        'This graph config declares Python graphs, which need `langgraph dev` (pip install -U "langgraph-cli[inmem]"); it is not installed on the machine of this local agent.',
      );
    }
    const cwd = dirname(join(buildDir, configRelative));
    if (this.#options.sandbox === 'none') logs.line(type, NONE_WARNING, 'warn');
    // Fetched by the agent; written by install and build, which run as the sandbox user.
    else giveTo(this.#options.sandboxUser, buildDir);
    const installCommand = deployment.install_command ?? detectInstallCommand(cwd);
    // Only sandboxed: the stored packages are bound read-only, which only a sandbox can do.
    const packages = this.#options.sandbox === 'bwrap' ? packagesKey(cwd, installCommand) : null;
    const reused = packages ? storedPackages(this.#options.workDir, deployment.id, packages) : null;
    if (reused)
      logs.line(type, `${installCommand}: skipped, package.json and the lock file are those of an earlier build; its installed packages are used (read-only)`);
    const steps: Array<[string, string | null]> = [
      ['install_command', reused ? null : installCommand],
      ['build_command', deployment.build_command],
    ];
    const limits = this.#sandboxed() ? this.#options.limits : null;
    if (this.#sandboxed() && !limits) logs.line(type, LIMITS_NONE_WARNING, 'warn');
    // Install and build share one deadline.
    const deadline = limits ? Date.now() + limits.buildTimeoutSeconds * 1000 : 0;
    for (const [label, command] of steps) {
      if (!command) continue;
      logs.line(type, `$ ${command}`);
      const cgroup = limits
        ? this.#cgroup(`${deployment.id}.${revision.id}.${label}`, { memoryMb: limits.buildMemoryMb, pidsMax: limits.pidsMax, cpus: limits.cpus })
        : null;
      const written = [buildDir, this.#cacheDir(deployment.id)];
      let result: Awaited<ReturnType<typeof runCommand>>;
      let breach: string | null = null;
      try {
        result = await (this.#options.tracing ?? NO_TRACING).step(
          // The span is the step (`install`, `build`), not the setting that names its command.
          label.replace(/_command$/, ''),
          revision,
          () =>
            runCommand(command, {
              cwd,
              env: this.#buildEnv(),
              sandbox: this.#sandboxFor(deployment.id, buildDir, cwd, null, reused ? { deploymentId: deployment.id, key: packages! } : null, cgroup),
              signal,
              onLine: (line, stream) => logs.line(type, line, stream === 'stderr' ? 'warn' : 'info'),
              timeout: limits ? { ms: Math.max(1, deadline - Date.now()), message: `build timeout of ${limits.buildTimeoutSeconds} s reached` } : undefined,
              watch: limits
                ? {
                    everyMs: 1000,
                    check: async () =>
                      (await diskUsage(written)) > limits.diskMb * 1024 * 1024 ? `disk limit of ${limits.diskMb} MiB reached (checkout and cache)` : null,
                  }
                : undefined,
            }),
          commandFailure,
        );
        // Read before the cgroup goes: its counters say which limit stopped the command.
        breach = cgroup?.breach() ?? null;
      } finally {
        cgroup?.remove();
      }
      if (result.aborted && !result.limit) throw new Aborted(`${label} interrupted`);
      const limit = result.limit ?? breach ?? (limits && result.code !== 0 ? spaceLimit(result, limits) : null);
      if (limit) throw new StageFailure(`${label} \`${command}\` stopped: ${limit}`);
      if (result.code !== 0) {
        const how = result.code === null ? `signal ${result.signal}` : `exit code ${result.code}`;
        throw new StageFailure(`${label} \`${command}\` failed with ${how}: ${result.lastLines.slice(-8).join('\n')}`);
      }
    }
    const kept = packages && !reused && storePackages(this.#options.workDir, deployment.id, packages, cwd) ? packages : null;
    markBuilt(buildDir, { sha, graph_config_path: revision.graph_config_path ?? 'langgraph.json', packages: reused || kept ? packages : null });
    logs.line(type, `build finished (${sha ? `commit ${sha}` : 'uploaded tarball'})`);
    return sha;
  }

  /**
   * Downloads the claim's tarball beside the build directory (streamed to disk, at most 200 MiB)
   * and unpacks it into `buildDir`, refusing unsafe entries. The URL is never logged: its
   * signature, with the token, reads the upload while the claim is held.
   */
  async #unpackUpload(url: string | null, buildDir: string, configPath: string, logs: LogStream, type: 'build' | 'deploy', signal: AbortSignal): Promise<void> {
    if (!url) throw new StageFailure('The work item names no URL for the uploaded tarball.');
    let from: string;
    try {
      from = onControlPlane(url, this.#options.url);
    } catch (error) {
      throw new StageFailure((error as Error).message);
    }
    const file = `${buildDir}.tar.gz`;
    logs.line(type, `local agent ${this.#options.agentId}: fetching the uploaded tarball from the control plane`);
    try {
      const bytes = await downloadTarball(from, this.#options.token, file, { signal });
      const { files } = await unpackTarball(file, buildDir);
      logs.line(type, `unpacked the uploaded tarball: ${bytes} bytes, ${files} files`);
      const hoisted = hoistSingleDirectory(buildDir, configPath);
      if (hoisted) logs.line(type, `the tarball holds one directory, ${hoisted}/, with ${configPath}: building from it`);
    } catch (error) {
      if (signal.aborted) throw new Aborted('interrupted');
      if (error instanceof WorkGone) throw error;
      throw new StageFailure(`Could not use the uploaded tarball: ${(error as Error).message}`);
    } finally {
      rmSync(file, { force: true });
    }
  }

  /** Starts the new server, moves the deployment's host names to it, then stops the previous one. */
  async #deploy(
    deployment: WorkDeployment,
    revision: WorkRevision,
    buildDir: string,
    logs: LogStream,
    move: (to: RevisionStatus, extra?: { status_message?: string }) => Promise<void>,
    signal: AbortSignal,
  ): Promise<void> {
    let output: (line: ServerLine) => void = (line) => logs.line('deploy', line.message, line.level);
    let server: RunningAgentServer;
    try {
      server = await (this.#options.tracing ?? NO_TRACING).step('start', revision, () =>
        this.#startServer(deployment.id, buildDir, revision, (line) => output(line), signal),
      );
    } catch (error) {
      if (signal.aborted) throw new Aborted('interrupted');
      // The error's own line first: it is what status_message shows.
      throw new StageFailure((error as Error).message);
    }
    const runtimeLogs = this.#runtimeLogs(revision.id);
    await this.#switch(deployment, revision, buildDir, server, logs, runtimeLogs, async () => {
      await move('DEPLOYED');
      // The claim ends with DEPLOYED: later output is shipped as the revision's runtime log.
      output = (line) => runtimeLogs.line(line);
    });
  }

  /** Routes the deployment to `server`; if `commit` fails, routes it back. Then stops the previous server. */
  async #switch(
    deployment: WorkDeployment,
    revision: WorkRevision,
    buildDir: string,
    server: RunningAgentServer,
    logs: LogStream,
    runtimeLogs: RuntimeLogShipper | null,
    commit: () => Promise<void>,
  ): Promise<void> {
    const hosts = hostsOf(deployment);
    const previous = this.#live.get(deployment.id);
    this.#proxy.route(deployment.id, hosts, server.upstream);
    this.#live.set(deployment.id, { revisionId: revision.id, server, hosts, buildDir, runtimeLogs });
    logs.line(
      'deploy',
      `serving ${deploymentUrl(this.#publicUrl, deployment.name)} through the agent's proxy (agent server at ${upstreamKey(server.upstream)}); the previous revision stops once its requests are answered`,
    );
    try {
      await commit();
    } catch (error) {
      if (previous) {
        this.#proxy.route(deployment.id, previous.hosts, previous.server.upstream);
        this.#live.set(deployment.id, previous);
      } else {
        this.#proxy.unroute(deployment.id);
        this.#live.delete(deployment.id);
      }
      await server.stop();
      await runtimeLogs?.stop();
      throw error;
    }
    // Built revisions only: an image's server is its container engine's to restart.
    if (runtimeLogs) this.#supervise(deployment, revision, this.#live.get(deployment.id)!, new RestartBudget());
    if (previous && upstreamKey(previous.server.upstream) !== upstreamKey(server.upstream)) {
      await this.#proxy.drained(previous.server.upstream);
      await previous.server.stop();
      await previous.runtimeLogs?.stop();
      if (previous.buildDir !== buildDir) removeBuild(previous.buildDir);
    }
    const inUse = builtRecord(buildDir)?.packages;
    prunePackages(this.#options.workDir, deployment.id, new Set(inUse ? [inUse] : []));
  }

  async #startServer(
    deploymentId: string,
    buildDir: string,
    revision: WorkRevision,
    onLine: (line: ServerLine) => void,
    signal: AbortSignal,
    command?: string,
  ): Promise<RunningAgentServer> {
    const configRelative = revision.graph_config_path ?? 'langgraph.json';
    const config: GraphConfig = command ? { language: 'javascript', graphs: [], server: { graphs: {} } } : readGraphConfigInside(buildDir, configRelative);
    const cwd = command ? buildDir : dirname(join(buildDir, configRelative));
    const secrets = Object.fromEntries(revision.secrets.map((s) => [s.name, s.value]));
    const stateDir = command ? null : this.#stateFolder(deploymentId, cwd);
    const key = builtRecord(buildDir)?.packages ?? null;
    const packages = key ? { deploymentId, key } : null;
    const socketDir = socketDirOf(buildDir);
    // A container engine isolates the image itself, and the sandbox could not reach its socket.
    const limits = this.#options.limits;
    // The revision's resource_spec where it sets them, else the agent's flags. The work item has the
    // spec as stored: a spec with only the requests (`memory_mb`, `cpu`) has its limits from the
    // hosted API's defaults (twice the request), as the k8s agent renders them.
    const spec = revision.resource_spec ? withResourceSpecDefaults(revision.resource_spec) : null;
    const cgroup =
      command || !stateDir || !limits || !this.#sandboxed()
        ? null
        : this.#cgroup(`${revision.id}.server`, {
            memoryMb: spec?.memory_limit_mb ?? limits.memoryMb,
            pidsMax: limits.pidsMax,
            cpus: spec?.cpu_limit ?? limits.cpus,
          });
    const sandbox =
      command || !stateDir ? null : this.#sandboxFor(deploymentId, buildDir, cwd, { stateDir, socketDir: this.#socketFolder(socketDir) }, packages, cgroup);
    const channel: ServerChannel | null = sandbox
      ? { node: `${SANDBOX_NODE_DIR}/node`, relay: SANDBOX_RELAY, socket: { host: join(socketDir, 'server.sock'), seen: `${SANDBOX_SOCKET_DIR}/server.sock` } }
      : null;
    const env = command || this.#options.sandbox === 'none' ? { ...this.#unsandboxedEnv(), ...secrets } : { ...this.#serverEnv(), ...secrets };
    const paths = { ...this.#serverPaths(), checkoutModules: key ? storedPackages(this.#options.workDir, deploymentId, key) : null };
    try {
      return await startAgentServer({ buildDir, cwd, config, command, paths, env, sandbox, channel, timeoutMs: this.#options.startTimeoutMs, signal, onLine });
    } catch (error) {
      // Stopped by its cgroup: the status message names the limit first.
      const breach = cgroup?.breach();
      cgroup?.remove();
      if (breach) throw new Error(`the agent server stopped: ${breach} (${(error as Error).message})`);
      throw error;
    }
  }

  /** The folder of a sandboxed server's socket: empty, the sandbox user's, nobody else's. */
  #socketFolder(dir: string): string {
    rmSync(dir, { recursive: true, force: true });
    // Its parent is passed through (0711) by bwrap, which runs as the sandbox user, to bind it.
    mkdirSync(dirname(dir), { recursive: true, mode: 0o711 });
    chmodSync(dirname(dir), 0o711);
    mkdirSync(dir, { mode: 0o700 });
    giveFolderTo(this.#options.sandboxUser, dir);
    return dir;
  }

  /**
   * The deployment's state folder (the agent server's own persistence, `.langgraph_api`), kept
   * across revisions and restarts and removed with the deployment. In the sandbox it is bound over
   * the checkout's `.langgraph_api`; unsandboxed, that path is a link to it.
   */
  #stateFolder(deploymentId: string, cwd: string): string {
    const state = join(this.#options.workDir, deploymentId, 'state');
    mkdirSync(state, { recursive: true });
    if (this.#sandboxed()) giveTo(this.#options.sandboxUser, state);
    const inCheckout = join(cwd, '.langgraph_api');
    // Whatever the checkout has there (a file, a link planted by the repository) gives way.
    rmSync(inCheckout, { recursive: true, force: true });
    if (this.#options.sandbox === 'none') symlinkSync(state, inCheckout);
    else {
      mkdirSync(inCheckout);
      giveFolderTo(this.#options.sandboxUser, inCheckout);
    }
    return state;
  }

  /**
   * What a command for the checkout `buildDir` sees, or null unsandboxed: its checkout
   * read-write; with `stateDir` (the agent server) its deployment's state folder, else (install and
   * build) the package managers' cache, read-write; the agent's Node and node_modules read-only.
   */
  #sandboxFor(
    deploymentId: string,
    buildDir: string,
    cwd: string,
    server: { stateDir: string; socketDir: string } | null,
    packages: { deploymentId: string; key: string } | null = null,
    cgroup: Cgroup | null = null,
  ): Sandboxed | null {
    if (!this.#sandboxed() || !this.#options.bwrapPath) return null;
    const writable = server
      ? [
          { from: server.stateDir, to: join(cwd, '.langgraph_api') },
          { from: server.socketDir, to: SANDBOX_SOCKET_DIR },
        ]
      : [{ from: this.#cacheDir(deploymentId), to: SANDBOX_CACHE_DIR }];
    const readOnly = sharedReadOnly(agentModules());
    if (server) readOnly.push({ from: RELAY, to: SANDBOX_RELAY });
    const stored = packages ? storedPackages(this.#options.workDir, packages.deploymentId, packages.key) : null;
    if (stored) readOnly.push({ from: stored, to: join(cwd, 'node_modules') });
    const egress = this.#options.egress;
    return {
      bwrap: this.#options.bwrapPath,
      spec: {
        checkout: buildDir,
        cwd,
        writable,
        readOnly,
        dieWithAgent: server === null,
        user: this.#options.sandboxUser,
        network: {
          policy: egress,
          pasta: this.#options.pastaPath,
          resolvConf: egress.mode === 'public' ? sandboxResolvConf(this.#options.workDir) : null,
        },
        limits: cgroup && this.#options.limits ? { cgroup, tmpMb: this.#options.limits.tmpMb, fileMb: this.#options.limits.diskMb } : null,
      },
    };
  }

  /** A cgroup for one command, with `limits` (made now; the command joins it as it starts). */
  #cgroup(name: string, limits: Limits): Cgroup | null {
    return this.#options.limits ? new Cgroup(this.#options.limits.cgroups, name, limits) : null;
  }

  #sandboxed(): boolean {
    return this.#options.sandbox === 'bwrap';
  }

  /**
   * The deployment's own package managers' cache: its installs write only there (a shared cache
   * one install could write would let it plant packages for every other deployment).
   */
  #cacheDir(deploymentId: string): string {
    const dir = this.#options.cacheDir ? join(resolve(this.#options.cacheDir), deploymentId) : join(this.#options.workDir, deploymentId, 'cache');
    // Its parent is passed through (0711) by bwrap, which runs as the sandbox user, to bind it.
    mkdirSync(dirname(dir), { recursive: true, mode: 0o711 });
    if (this.#options.cacheDir) chmodSync(dirname(dir), 0o711);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    giveFolderTo(this.#options.sandboxUser, dir);
    return dir;
  }

  /** Where the server command finds Node and the agent's own LangGraph packages. */
  #serverPaths(): ServerPaths {
    const modules = agentModules();
    if (this.#options.sandbox === 'none') return { node: process.execPath, agentModules: modules ? { host: modules, seen: modules } : null };
    return { node: `${SANDBOX_NODE_DIR}/node`, agentModules: modules ? { host: modules, seen: SANDBOX_AGENT_MODULES } : null };
  }

  /** What every sandboxed command starts from: PATH, a home of its own, a locale, and the system's certificates for Node. */
  #baseEnv(): Record<string, string> {
    return { PATH: SANDBOX_PATH, HOME: SANDBOX_HOME, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', NODE_USE_SYSTEM_CA: '1' };
  }

  /** Install and build: no secrets; the package managers' caches, and the operator variables named with --pass-env. */
  #buildEnv(): NodeJS.ProcessEnv {
    if (this.#options.sandbox === 'none') return this.#unsandboxedEnv();
    const cache = SANDBOX_CACHE_DIR;
    const env: Record<string, string> = {
      ...this.#baseEnv(),
      npm_config_cache: `${cache}/npm`,
      npm_config_update_notifier: 'false',
      YARN_CACHE_FOLDER: `${cache}/yarn`,
      // pnpm keeps its store under PNPM_HOME (<cache>/pnpm/store); an npm_config_store_dir would make npm warn in every build log.
      PNPM_HOME: `${cache}/pnpm`,
      BUN_INSTALL_CACHE_DIR: `${cache}/bun`,
      PIP_CACHE_DIR: `${cache}/pip`,
      UV_CACHE_DIR: `${cache}/uv`,
    };
    for (const name of this.#options.passEnv) {
      const value = this.#options.env[name];
      if (value !== undefined) env[name] = value;
    }
    return env;
  }

  /** The agent server: nothing of the operator's environment (its secrets are added by the caller). */
  #serverEnv(): NodeJS.ProcessEnv {
    return { ...this.#baseEnv(), NODE_ENV: 'production', LOG_JSON: 'true', LOG_LEVEL: 'info' };
  }

  /** `--sandbox none` and container engines: the agent's environment, its token removed, its own Node first on PATH. */
  #unsandboxedEnv(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...this.#options.env, LOG_JSON: 'true', LOG_LEVEL: 'info' };
    delete env.CONTROL_PLANE_AGENT_TOKEN;
    env.PATH = `${dirname(process.execPath)}:${env.PATH ?? ''}`;
    return env;
  }

  /** git runs outside the sandbox (it runs no repository code on clone): the agent's environment without its token. */
  #gitEnv(): NodeJS.ProcessEnv {
    const env = { ...this.#options.env };
    delete env.CONTROL_PLANE_AGENT_TOKEN;
    return env;
  }

  #runtimeLogs(revisionId: string): RuntimeLogShipper {
    return new RuntimeLogShipper(this.#client, revisionId, (message) => this.#options.print(message), this.#options.runtimeLogs);
  }

  /** `external_docker` on a local listener: a container engine runs the image, or the revision fails at once. */
  async #runImage(
    deployment: WorkDeployment,
    revision: WorkRevision,
    image: string,
    buildDir: string,
    logs: LogStream,
    move: (to: RevisionStatus, extra?: { status_message?: string }) => Promise<void>,
    status: () => RevisionStatus,
    signal: AbortSignal,
  ): Promise<void> {
    const engine = (await answers('docker', ['info'])) ? 'docker' : (await answers('podman', ['info'])) ? 'podman' : null;
    if (!engine)
      throw new StageFailure(
        'A container engine is needed to run images on a local listener: neither `docker info` nor `podman info` answered on this machine.',
      );
    if (status() === 'AWAITING_DEPLOY') await move('DEPLOYING');
    mkdirSync(buildDir, { recursive: true });
    const env = revision.secrets.map((s) => `-e ${quote(s.name)}`).join(' ');
    const command = `exec ${engine} run --rm --name ${quote(`cp-${deployment.id}-${revision.id}`)} -p 127.0.0.1:{port}:8000 ${env} ${quote(image)}`;
    logs.line('deploy', `$ ${engine} run … ${image}`);
    let server: RunningAgentServer;
    try {
      server = await this.#startServer(deployment.id, buildDir, revision, (line) => logs.line('deploy', line.message, line.level), signal, command);
    } catch (error) {
      if (signal.aborted) throw new Aborted('interrupted');
      throw new StageFailure(`The image did not start: ${(error as Error).message}`);
    }
    await this.#switch(deployment, revision, buildDir, server, logs, null, () => move('DEPLOYED'));
  }

  async #teardown(deployment: WorkDeployment, claimId: string): Promise<void> {
    const live = this.#live.get(deployment.id);
    // Whether or not this agent serves it now (an agent restarted meanwhile), nothing of the
    // deployment stays routed: every host and path it had answers 404.
    this.#proxy.unroute(deployment.id);
    if (live) {
      // Forgotten first: its server's exit is then no crash to restart it after.
      this.#live.delete(deployment.id);
      await live.server.stop();
      removeBuild(live.buildDir);
      await live.runtimeLogs?.stop();
    }
    rmSync(join(this.#options.workDir, deployment.id), { recursive: true, force: true });
    rmSync(this.#cacheDir(deployment.id), { recursive: true, force: true });
    this.#options.print(`agent: tore down ${deployment.name}`);
    await this.#client.done(claimId);
  }

  /**
   * Restarts the live server of `live` when it exits (it crashed, or a graph called
   * `process.exit`), at most 3 times in 10 minutes; the next exit fails the revision: it is said in
   * its deploy log and the deployment is no longer routed. A server stopped on purpose (replaced,
   * torn down, the agent stopping) is no longer `live` by then and is left alone.
   * docs/decisions/local-agent-server-restarts.md says why the revision's status stays DEPLOYED.
   */
  #supervise(deployment: WorkDeployment, revision: WorkRevision, live: Live, budget: RestartBudget): void {
    const current = () => !this.#stopping.signal.aborted && this.#live.get(deployment.id) === live;
    const say = (level: 'warn' | 'error', message: string) => {
      live.runtimeLogs?.line({ level, message });
      this.#options.print(`agent: ${deployment.name}: ${message}`);
    };
    void live.server.exited.then(async (how) => {
      if (!current()) return;
      const restart = budget.exit(Date.now());
      if (restart === null) {
        say(
          'error',
          `revision ${revision.id} failed: its agent server ${how} after it was deployed, the ${MAX_RESTARTS + 1}th exit in ${RESTART_WINDOW_MS / 60_000} minutes, and is not restarted again (a new revision, or restarting the agent, serves it again)`,
        );
        this.#proxy.unroute(deployment.id);
        this.#live.delete(deployment.id);
        await live.runtimeLogs?.stop();
        return;
      }
      say(
        'warn',
        `the agent server of revision ${revision.id} ${how} after it was deployed; restarting it (restart ${restart} of ${MAX_RESTARTS} in ${RESTART_WINDOW_MS / 60_000} minutes)`,
      );
      let server: RunningAgentServer;
      try {
        server = await this.#startServer(deployment.id, live.buildDir, revision, (line) => live.runtimeLogs?.line(line), this.#stopping.signal);
      } catch (error) {
        if (!current()) return;
        // A restart that does not come up counts as one more exit.
        const failed = { ...live.server, exited: Promise.resolve(`did not start again (${(error as Error).message})`) };
        const next = { ...live, server: failed };
        this.#live.set(deployment.id, next);
        this.#supervise(deployment, revision, next, budget);
        return;
      }
      if (!current()) {
        await server.stop();
        return;
      }
      const next = { ...live, server };
      this.#proxy.route(deployment.id, live.hosts, server.upstream);
      this.#live.set(deployment.id, next);
      this.#supervise(deployment, revision, next, budget);
    });
  }

  /** At start: serves again every live revision of the listener whose build is on this machine. */
  async #restore(): Promise<void> {
    const { deployments } = await this.#client.live(this.#stopping.signal);
    for (const { deployment, revision } of deployments) {
      if (this.#stopping.signal.aborted) return;
      const buildDir = join(this.#options.workDir, deployment.id, revision.id);
      if (!isBuilt(buildDir)) {
        this.#options.print(`agent: ${deployment.name}: revision ${revision.id} was not built on this machine; not serving it`);
        continue;
      }
      const runtimeLogs = this.#runtimeLogs(revision.id);
      const adopted = await adoptAgentServer(buildDir, (line) => runtimeLogs.line(line));
      if (adopted) {
        // The server the previous agent left serving: its threads and runs go on untouched.
        const hosts = hostsOf(deployment);
        this.#proxy.route(deployment.id, hosts, adopted.upstream);
        this.#live.set(deployment.id, { revisionId: revision.id, server: adopted, hosts, buildDir, runtimeLogs });
        this.#supervise(deployment, revision, this.#live.get(deployment.id)!, new RestartBudget());
        this.#options.print(
          `agent: ${deployment.name}: took over the agent server (pid ${adopted.pid}) of revision ${revision.id} that the previous agent left serving`,
        );
        continue;
      }
      const ended = await endOrphan(buildDir);
      if (ended) this.#options.print(`agent: ${deployment.name}: ${ended}`);
      try {
        const server = await this.#startServer(deployment.id, buildDir, revision, (line) => runtimeLogs.line(line), this.#stopping.signal);
        const hosts = hostsOf(deployment);
        this.#proxy.route(deployment.id, hosts, server.upstream);
        this.#live.set(deployment.id, { revisionId: revision.id, server, hosts, buildDir, runtimeLogs });
        this.#supervise(deployment, revision, this.#live.get(deployment.id)!, new RestartBudget());
        this.#options.print(`agent: ${deployment.name}: restarted revision ${revision.id} from its build directory (no rebuild)`);
      } catch (error) {
        this.#options.print(`agent: ${deployment.name}: could not restart revision ${revision.id}: ${(error as Error).message}`);
      }
    }
  }
}

/**
 * The names the proxy serves a deployment under: its name's DNS-safe form (as a host's first label,
 * and in `/d/<name>/`), so names that differ only in case or `_`/`-` never share a route; and its
 * `custom_url` host when that names only it (not an address or `localhost`, which a path-based
 * URL template has).
 */
function hostsOf(deployment: WorkDeployment): string[] {
  const hosts = [dnsSafeName(deployment.name)];
  if (deployment.custom_url) {
    try {
      const host = new URL(deployment.custom_url).hostname;
      if (host.includes('.') && !isIP(host.replace(/^\[|\]$/g, '')) && host !== 'localhost') hosts.push(host);
    } catch {
      // not a URL: the name still routes
    }
  }
  return hosts;
}

/**
 * The path form on the proxy's address (`http://127.0.0.1:8180/d/{name}`): every HTTP client
 * reaches it without DNS, where `{name}.localhost` resolves in curl and browsers but not in Node's
 * or Python's resolver (docs/decisions/local-agent-urls.md). A wildcard listening address is
 * reached on loopback.
 */
export function defaultPublicUrl(proxyHost: string, proxyPort: number): string {
  const host = proxyHost === '0.0.0.0' || proxyHost === '::' || proxyHost === '' ? '127.0.0.1' : proxyHost;
  return `http://${isIP(host) === 6 ? `[${host}]` : host}:${proxyPort}/d/{name}`;
}

/** Where a sandboxed server's socket folder is bound inside its sandbox. */
const SANDBOX_SOCKET_DIR = '/run/agent-server';
/** The relay that serves a sandboxed server's port as that socket (sandbox-relay.mjs), and where the sandbox sees it. */
const RELAY = fileURLToPath(new URL('./sandbox-relay.mjs', import.meta.url));
const SANDBOX_RELAY = '/opt/agent/sandbox-relay.mjs';

/** The agent's own node_modules (where its LangGraph CLI and API server are), or null. */
function agentModules(): string | null {
  try {
    const manifest = createRequire(import.meta.url).resolve('@langchain/langgraph-cli/package.json');
    return realpathSync(dirname(dirname(dirname(manifest))));
  } catch {
    return null;
  }
}

async function answers(command: string, args: string[]): Promise<boolean> {
  try {
    await run(command, args, { timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}

/** Waits `ms`, or less when `signal` aborts meanwhile. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
