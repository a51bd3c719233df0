import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import type { WorkDeployment, WorkItem, WorkRevision } from '../shared/schemas/agent.ts';
import type { RevisionStatus } from '../shared/schemas/revision.ts';
import { isBuilt, removeBuild } from './build-records.ts';
import { ClaimLoop } from './claim-loop.ts';
import { AgentClient, WorkGone } from './client.ts';
import { Aborted } from './git.ts';
import type { AgentLimits } from './limits.ts';
import { LiveServers, type StartingServer } from './live-servers.ts';
import { LocalBuilder } from './local-build.ts';
import { LogStream } from './log-stream.ts';
import { ProxyClient } from './proxy-client.ts';
import type { RuntimeLogOptions } from './runtime-logs.ts';
import { type SandboxMode, sharedReadOnly } from './sandbox.ts';
import type { EgressPolicy } from './sandbox-network.ts';
import { agentModules, RELAY, SandboxSetup, SERVER_PRELOAD } from './sandbox-setup.ts';
import { folderBarringUser, type SandboxUser } from './sandbox-user.ts';
import { makeSocketRoot } from './socket-root.ts';
import { takeOverLive } from './take-over.ts';
import type { AgentTracing } from './tracing.ts';

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

/**
 * The `local` listener agent: pulls work of its listener through the shared claim loop, builds
 * `github` revisions (real git) and `internal_source` ones (the uploaded tarball) in a work
 * directory with the package manager (local-build.ts), runs the LangGraph agent server of each live
 * revision (live-servers.ts), and routes `<deployment host>` to it through its reverse proxy.
 */
export class LocalAgent {
  readonly #options: LocalAgentOptions;
  readonly #client: AgentClient;
  readonly #proxy: ProxyClient;
  readonly #setup: SandboxSetup;
  readonly #builder: LocalBuilder;
  readonly #servers: LiveServers;
  /** The attempt on each revision still running here: a new claim of it waits for the old one to end (and clean up). */
  readonly #attempts = new Map<string, Promise<void>>();
  readonly #stopping = new AbortController();
  /** The URL template this agent reports (set at start): what its deploy logs name, never the server's placeholder. */
  #publicUrl = '';
  #loop: ClaimLoop | null = null;
  #starting: Promise<unknown> | null = null;

  constructor(options: LocalAgentOptions) {
    this.#options = { ...options, workDir: resolve(options.workDir) };
    this.#proxy = new ProxyClient(this.#options.workDir);
    this.#client = new AgentClient(options);
    this.#setup = new SandboxSetup(this.#options);
    this.#builder = new LocalBuilder(this.#options, this.#setup);
    this.#servers = new LiveServers({
      options: this.#options,
      setup: this.#setup,
      client: this.#client,
      proxy: this.#proxy,
      stopping: this.#stopping.signal,
      publicUrl: () => this.#publicUrl,
    });
  }

  /**
   * Starts the proxy, restarts the live revisions' servers, says hello, then pulls work. `stop()`
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
    const folderMode = this.#setup.sandboxed() && this.#options.sandboxUser ? 0o711 : 0o700;
    // Its missing parents (the default ./data of ./data/agent) as any folder is made: the sandbox
    // user's bwrap must pass through them to bind a deployment's folders.
    mkdirSync(dirname(this.#options.workDir), { recursive: true });
    mkdirSync(this.#options.workDir, { recursive: true, mode: 0o700 });
    chmodSync(this.#options.workDir, folderMode);
    // The proxy's control socket and the servers' sockets: in the work directory, or (when that is
    // too long for a socket's path) in a short folder standing for it, passed through the same way.
    const socketRoot = makeSocketRoot(this.#options.workDir, folderMode);
    if (socketRoot !== this.#options.workDir) this.#options.print(`agent: the work directory is too long for unix sockets; they live in ${socketRoot}`);
    const sandboxUser = this.#setup.sandboxed() ? this.#options.sandboxUser : null;
    if (sandboxUser) {
      // What every sandbox binds: the work directory, the agent's Node and packages, the relay.
      for (const path of [this.#options.workDir, RELAY, SERVER_PRELOAD, ...sharedReadOnly(agentModules()).map((bind) => bind.from)]) {
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
    await takeOverLive({ client: this.#client, servers: this.#servers, workDir: this.#options.workDir, signal, print: this.#options.print });
    checkStopping();
    await this.#proxy.publish();
    const publicUrl = this.#options.publicUrl ?? defaultPublicUrl(this.#options.proxyHost, proxyPort);
    this.#publicUrl = publicUrl;
    this.#options.print(`agent: deployments answer at ${publicUrl}`);
    const { agentId, version, capacity } = this.#options;
    this.#loop = new ClaimLoop({ client: this.#client, agentId, version, capacity, publicUrl, print: this.#options.print }, (work, claimSignal) =>
      this.#handle(work, claimSignal),
    );
    await this.#loop.start();
    checkStopping();
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
    this.#stopping.abort(new Aborted('the agent is stopping'));
    // Stopped before the start is awaited too: its first heartbeat, if under way, ends at once.
    const loopStopped = this.#loop?.stop();
    await this.#starting?.catch(() => undefined);
    await Promise.all([loopStopped, this.#loop?.stop()]);
    await this.#servers.stopAll(options.leaveServing ?? false);
    await this.#proxy.close(!options.leaveServing);
  }

  /** Carries one claim (the claim loop renews its lease; `signal` aborts when it is lost or the agent stops). */
  async #handle(work: WorkItem, signal: AbortSignal): Promise<void> {
    if (work.kind === 'teardown') await this.#teardown(work.deployment, work.claim_id);
    else await this.#afterEarlierAttempt(work.revision.id, () => this.#carryRevision(work.deployment, work.revision, work.claim_id, signal));
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

  async #carryRevision(deployment: WorkDeployment, revision: WorkRevision, claimId: string, claimSignal: AbortSignal): Promise<void> {
    // Aborted by the claim loop (claim lost, agent stopping) or by a 409 on a log write.
    const gone = new AbortController();
    const signal = AbortSignal.any([claimSignal, gone.signal]);
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
    // The revision's server, started as soon as its build is done: the control plane hears of the
    // build's end (AWAITING_DEPLOY, DEPLOYING) while Node loads the server, and it is routed to only
    // once DEPLOYING and healthy.
    let starting: StartingServer | null = null;
    try {
      if (revision.source.type === 'image') {
        await this.#servers.runImage(deployment, revision, revision.source.image_uri, buildDir, logs, move, () => status, signal);
        return;
      }
      if (status === 'AWAITING_BUILD') {
        const claimedAt = Date.now();
        await move('BUILDING');
        // Stamped when the claim came (the log says how long the work waited for an agent), sent
        // after the move: before it, it would cost the move a request of its own.
        logs.line('build', `claimed by local agent ${this.#options.agentId}`, 'info', claimedAt);
      }
      if (status === 'BUILDING') {
        const sha = await this.#builder.build(deployment, revision, buildDir, logs, 'build', signal);
        starting = this.#servers.start(deployment.id, revision, buildDir, logs, signal);
        // An uploaded tarball has no commit: repo_commit_sha stays null.
        await move('AWAITING_DEPLOY', sha ? { repo_commit_sha: sha } : {});
      }
      if (status === 'AWAITING_DEPLOY') await move('DEPLOYING');
      if (status === 'DEPLOYING') {
        if (!isBuilt(buildDir)) {
          // Built by an agent that is gone (its lease lapsed after the build): build again here.
          logs.line('deploy', `local agent ${this.#options.agentId}: the build of this revision is not on this machine; building it again`);
          await this.#builder.build(deployment, revision, buildDir, logs, 'deploy', signal);
        }
        const deploying = starting ?? this.#servers.start(deployment.id, revision, buildDir, logs, signal);
        starting = null;
        await this.#servers.deploy(deployment, revision, buildDir, logs, move, deploying);
      }
    } catch (error) {
      // Started, but the work ended before the deploy took it: gone before its build is removed.
      await starting?.abandon();
      if (signal.aborted || error instanceof WorkGone || error instanceof Aborted) {
        this.#options.print(`agent: stopped work on revision ${revision.id}: ${String(signal.reason ?? error)}`);
        if (!this.#servers.servesBuild(buildDir)) removeBuild(buildDir);
        return;
      }
      const message = error instanceof Error ? error.message : String(error);
      const failed: RevisionStatus = status === 'AWAITING_BUILD' || status === 'BUILDING' ? 'BUILD_FAILED' : 'DEPLOY_FAILED';
      logs.line(failed === 'BUILD_FAILED' ? 'build' : 'deploy', message, 'error');
      await move(failed, { status_message: message.slice(0, 4000) }).catch((e: unknown) =>
        this.#options.print(`agent: could not report ${failed}: ${String(e)}`),
      );
      if (!this.#servers.servesBuild(buildDir)) removeBuild(buildDir);
    } finally {
      await logs.flush();
    }
  }

  async #teardown(deployment: WorkDeployment, claimId: string): Promise<void> {
    await this.#servers.remove(deployment.id);
    rmSync(join(this.#options.workDir, deployment.id), { recursive: true, force: true });
    rmSync(this.#setup.cacheDir(deployment.id), { recursive: true, force: true });
    this.#options.print(`agent: tore down ${deployment.name}`);
    await this.#client.done(claimId);
  }
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
