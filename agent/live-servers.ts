import { mkdirSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, join } from 'node:path';
import { deploymentUrl, dnsSafeName } from '../shared/dns-safe-name.ts';
import type { WorkDeployment, WorkRevision } from '../shared/schemas/agent.ts';
import { withResourceSpecDefaults } from '../shared/schemas/resource-spec.ts';
import type { RevisionStatus } from '../shared/schemas/revision.ts';
import { type RunningAgentServer, type ServerChannel, startAgentServer } from './agent-server.ts';
import { builtRecord, removeBuild, socketDirOf } from './build-records.ts';
import { sleep } from './claim-loop.ts';
import { type AgentClient, Refused, WorkGone } from './client.ts';
import { Aborted, quote } from './git.ts';
import { type GraphConfig, readGraphConfigInside } from './graph-config.ts';
import type { LocalAgentOptions } from './local-agent.ts';
import { answers, StageFailure } from './local-build.ts';
import type { LogStream } from './log-stream.ts';
import { prunePackages, storedPackages } from './package-store.ts';
import type { ProxyClient } from './proxy-client.ts';
import { RuntimeLogShipper } from './runtime-logs.ts';
import { SANDBOX_NODE_DIR } from './sandbox.ts';
import { SANDBOX_RELAY, SANDBOX_SOCKET_DIR, type SandboxSetup } from './sandbox-setup.ts';
import type { ServerLine } from './server-output.ts';
import { MAX_RESTARTS, RESTART_WINDOW_MS, RestartBudget } from './server-restarts.ts';
import { NO_TRACING } from './tracing.ts';
import { upstreamKey } from './upstream.ts';

/** A revision's server on its way up (`LiveServers.start`). */
export type StartingServer = {
  /** Settles once it answers GET /ok (or failed to). */
  server: Promise<RunningAgentServer>;
  /** Where its output goes now. */
  output: { to: (line: ServerLine) => void };
  /** Stops it, up or not yet; resolves once it is gone. */
  abandon(): Promise<void>;
};

type Live = { revisionId: string; server: RunningAgentServer; hosts: string[]; buildDir: string; runtimeLogs: RuntimeLogShipper | null };

export type LiveServersDeps = {
  options: LocalAgentOptions;
  setup: SandboxSetup;
  client: AgentClient;
  proxy: ProxyClient;
  /** Aborts when the agent stops: no restart, no report retried, after it. */
  stopping: AbortSignal;
  /** The URL template the agent reports (known once its proxy listens): what deploy logs name. */
  publicUrl: () => string;
};

/**
 * The agent servers of the deployments this agent serves, one live server each: starts a
 * revision's server and routes the deployment's names to it (then stops the one it replaces),
 * restarts a server that exits after DEPLOYED (at most 3 times in 10 minutes, then fails the
 * revision), and stops or leaves them serving when the agent stops.
 */
export class LiveServers {
  readonly #o: LocalAgentOptions;
  readonly #setup: SandboxSetup;
  readonly #client: AgentClient;
  readonly #proxy: ProxyClient;
  readonly #stopping: AbortSignal;
  readonly #publicUrl: () => string;
  readonly #live = new Map<string, Live>();

  constructor(deps: LiveServersDeps) {
    this.#o = deps.options;
    this.#setup = deps.setup;
    this.#client = deps.client;
    this.#proxy = deps.proxy;
    this.#stopping = deps.stopping;
    this.#publicUrl = deps.publicUrl;
  }

  /** Whether a live server runs from `buildDir` (a failed attempt must not remove it). */
  servesBuild(buildDir: string): boolean {
    return [...this.#live.values()].some((live) => live.buildDir === buildDir);
  }

  /**
   * Routes the deployment to `server` of its live revision (a server taken over after a restart
   * of the agent, or started again from its build) and watches it.
   */
  serve(deployment: WorkDeployment, revision: WorkRevision, buildDir: string, server: RunningAgentServer, runtimeLogs: RuntimeLogShipper): void {
    const live: Live = { revisionId: revision.id, server, hosts: hostsOf(deployment), buildDir, runtimeLogs };
    this.#proxy.route(deployment.id, live.hosts, server.upstream);
    this.#live.set(deployment.id, live);
    this.supervise(deployment, revision, live, new RestartBudget());
  }

  /** The deployment is torn down: nothing of it stays routed, its server stops and its build goes. */
  async remove(deploymentId: string): Promise<void> {
    const live = this.#live.get(deploymentId);
    // Whether or not this agent serves it now (an agent restarted meanwhile), nothing of the
    // deployment stays routed: every host and path it had answers 404.
    this.#proxy.unroute(deploymentId);
    if (!live) return;
    // Forgotten first: its server's exit is then no crash to restart it after.
    this.#live.delete(deploymentId);
    await live.server.stop();
    removeBuild(live.buildDir);
    await live.runtimeLogs?.stop();
  }

  /** Stops every server, or (`leaveServing`) leaves each running for the next agent to take over. */
  async stopAll(leaveServing: boolean): Promise<void> {
    if (leaveServing) this.#o.print(`agent: leaving the proxy and ${this.#live.size} live server(s) serving for the next agent`);
    await Promise.allSettled(
      [...this.#live.values()].map(async (live) => {
        if (leaveServing) live.server.detach();
        else await live.server.stop();
        await live.runtimeLogs?.stop();
      }),
    );
    this.#live.clear();
  }

  /**
   * Starts the revision's server, not routed to yet: `deploy` routes to it once it is healthy. Its
   * output goes to the revision's deploy log until `deploy` reports DEPLOYED. A start no `deploy`
   * will take (the work went away first) is ended with `abandon()`.
   */
  start(deploymentId: string, revision: WorkRevision, buildDir: string, logs: LogStream, signal: AbortSignal): StartingServer {
    const output = { to: (line: ServerLine) => logs.line('deploy', line.message, line.level) };
    const abandoned = new AbortController();
    const startSignal = AbortSignal.any([signal, abandoned.signal]);
    const startedAt = Date.now();
    logs.line('deploy', 'starting the agent server');
    const server = (async () => {
      try {
        const started = await (this.#o.tracing ?? NO_TRACING).step('start', revision, () =>
          this.startServer(deploymentId, buildDir, revision, (line) => output.to(line), startSignal),
        );
        logs.line('deploy', `the agent server answers GET /ok, ${Date.now() - startedAt} ms after its start`);
        return started;
      } catch (error) {
        if (startSignal.aborted) throw new Aborted('interrupted');
        // The error's own line first: it is what status_message shows.
        throw new StageFailure((error as Error).message);
      }
    })();
    // Awaited by `deploy`, or by `abandon`; never left to fail unheard.
    server.catch(() => undefined);
    return {
      server,
      output,
      abandon: async () => {
        abandoned.abort(new Aborted('the work on this revision ended before its server was deployed'));
        await server.then((running) => running.stop()).catch(() => undefined);
      },
    };
  }

  /** Routes the deployment to its revision's server once that is healthy (`start`), then stops the previous one. */
  async deploy(
    deployment: WorkDeployment,
    revision: WorkRevision,
    buildDir: string,
    logs: LogStream,
    move: (to: RevisionStatus, extra?: { status_message?: string }) => Promise<void>,
    starting: StartingServer,
  ): Promise<void> {
    const server = await starting.server;
    const runtimeLogs = this.runtimeLogs(revision.id);
    await this.#switch(deployment, revision, buildDir, server, logs, runtimeLogs, async () => {
      await move('DEPLOYED');
      // The claim ends with DEPLOYED: later output is shipped as the revision's runtime log.
      starting.output.to = (line) => runtimeLogs.line(line);
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
    // Said (and DEPLOYED reported) once the proxy has the new route, not when it was sent.
    await this.#proxy.routed();
    logs.line(
      'deploy',
      `serving ${deploymentUrl(this.#publicUrl(), deployment.name)} through the agent's proxy (agent server at ${upstreamKey(server.upstream)}); the previous revision stops once its requests are answered`,
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
    if (runtimeLogs) this.supervise(deployment, revision, this.#live.get(deployment.id)!, new RestartBudget());
    if (previous && upstreamKey(previous.server.upstream) !== upstreamKey(server.upstream)) {
      await this.#proxy.drained(previous.server.upstream);
      await previous.server.stop();
      await previous.runtimeLogs?.stop();
      if (previous.buildDir !== buildDir) removeBuild(previous.buildDir);
    }
    const inUse = builtRecord(buildDir)?.packages;
    prunePackages(this.#o.workDir, deployment.id, new Set(inUse ? [inUse] : []));
  }

  async startServer(
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
    const stateDir = command ? null : this.#setup.stateFolder(deploymentId, cwd);
    const key = builtRecord(buildDir)?.packages ?? null;
    const packages = key ? { deploymentId, key } : null;
    const socketDir = socketDirOf(buildDir);
    // A container engine isolates the image itself, and the sandbox could not reach its socket.
    const limits = this.#o.limits;
    // The revision's resource_spec where it sets them, else the agent's flags. The work item has the
    // spec as stored: a spec with only the requests (`memory_mb`, `cpu`) has its limits from the
    // hosted API's defaults (twice the request), as the k8s agent renders them.
    const spec = revision.resource_spec ? withResourceSpecDefaults(revision.resource_spec) : null;
    const cgroup =
      command || !stateDir || !limits || !this.#setup.sandboxed()
        ? null
        : this.#setup.cgroup(`${revision.id}.server`, {
            memoryMb: spec?.memory_limit_mb ?? limits.memoryMb,
            pidsMax: limits.pidsMax,
            cpus: spec?.cpu_limit ?? limits.cpus,
          });
    const sandbox =
      command || !stateDir
        ? null
        : this.#setup.sandboxFor(
            deploymentId,
            buildDir,
            cwd,
            { stateDir, socketDir: this.#setup.socketFolder(socketDir), compileCacheDir: this.#setup.compileCacheFolder(deploymentId, cwd) },
            packages,
            cgroup,
          );
    const channel: ServerChannel | null = sandbox
      ? { node: `${SANDBOX_NODE_DIR}/node`, relay: SANDBOX_RELAY, socket: { host: join(socketDir, 'server.sock'), seen: `${SANDBOX_SOCKET_DIR}/server.sock` } }
      : null;
    const base = command || this.#o.sandbox === 'none' ? this.#setup.unsandboxedEnv() : this.#setup.serverEnv();
    if (!command && this.#o.sandbox === 'none') this.#setup.compileCacheFolder(deploymentId, cwd);
    const stored = key ? storedPackages(this.#o.workDir, deploymentId, key) : null;
    // The packages' resolutions are kept only where the stored packages are what the server sees at node_modules: bound there by the sandbox.
    const kept = stored && key && this.#setup.sandboxed() ? { key, dir: stored } : null;
    const env = { ...base, ...(command ? {} : this.#setup.compileCacheEnv(cwd, kept)), ...secrets };
    const paths = { ...this.#setup.serverPaths(), checkoutModules: stored };
    try {
      return await startAgentServer({ buildDir, cwd, config, command, paths, env, sandbox, channel, timeoutMs: this.#o.startTimeoutMs, signal, onLine });
    } catch (error) {
      // Stopped by its cgroup: the status message names the limit first.
      const breach = cgroup?.breach();
      cgroup?.remove();
      if (breach) throw new Error(`the agent server stopped: ${breach} (${(error as Error).message})`);
      throw error;
    }
  }

  runtimeLogs(revisionId: string): RuntimeLogShipper {
    return new RuntimeLogShipper(this.#client, revisionId, (message) => this.#o.print(message), this.#o.runtimeLogs);
  }

  /** `external_docker` on a local listener: a container engine runs the image, or the revision fails at once. */
  async runImage(
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
      server = await this.startServer(deployment.id, buildDir, revision, (line) => logs.line('deploy', line.message, line.level), signal, command);
    } catch (error) {
      if (signal.aborted) throw new Aborted('interrupted');
      throw new StageFailure(`The image did not start: ${(error as Error).message}`);
    }
    await this.#switch(deployment, revision, buildDir, server, logs, null, () => move('DEPLOYED'));
  }

  /**
   * Restarts the live server of `live` when it exits (it crashed, or a graph called
   * `process.exit`), at most 3 times in 10 minutes; the next exit fails the revision
   * (DEPLOYED → DEPLOY_FAILED, docs/decisions/failing-a-live-revision.md) and the deployment is no
   * longer routed. A server stopped on purpose (replaced, torn down, the agent stopping) is no
   * longer `live` by then and is left alone.
   */
  supervise(deployment: WorkDeployment, revision: WorkRevision, live: Live, budget: RestartBudget): void {
    const current = () => !this.#stopping.aborted && this.#live.get(deployment.id) === live;
    void live.server.exited.then(async (how) => {
      if (!current()) return;
      const restart = budget.exit(Date.now());
      if (restart === null) {
        const message = `revision ${revision.id} failed: its agent server ${how} after it was deployed, the ${MAX_RESTARTS + 1}th exit in ${RESTART_WINDOW_MS / 60_000} minutes, and is not restarted again (a new revision serves the deployment again)`;
        this.#o.print(`agent: ${deployment.name}: ${message}`);
        this.#proxy.unroute(deployment.id);
        this.#live.delete(deployment.id);
        // The server's last lines first; the control plane writes the failure's own log line with the move.
        await live.runtimeLogs?.stop();
        await this.#reportLiveFailure(deployment, revision.id, message);
        return;
      }
      const restarting = `the agent server of revision ${revision.id} ${how} after it was deployed; restarting it (restart ${restart} of ${MAX_RESTARTS} in ${RESTART_WINDOW_MS / 60_000} minutes)`;
      live.runtimeLogs?.line({ level: 'warn', message: restarting });
      this.#o.print(`agent: ${deployment.name}: ${restarting}`);
      let server: RunningAgentServer;
      try {
        server = await this.startServer(deployment.id, live.buildDir, revision, (line) => live.runtimeLogs?.line(line), this.#stopping);
      } catch (error) {
        if (!current()) return;
        // A restart that does not come up counts as one more exit.
        const failed = { ...live.server, exited: Promise.resolve(`did not start again (${(error as Error).message})`) };
        const next = { ...live, server: failed };
        this.#live.set(deployment.id, next);
        this.supervise(deployment, revision, next, budget);
        return;
      }
      if (!current()) {
        await server.stop();
        return;
      }
      const next = { ...live, server };
      this.#proxy.route(deployment.id, live.hosts, server.upstream);
      this.#live.set(deployment.id, next);
      this.supervise(deployment, revision, next, budget);
    });
  }

  /**
   * Moves the live revision to DEPLOY_FAILED with `message`, retried while the control plane does
   * not answer (until the agent stops); a refusal (it was superseded meanwhile: 409) ends it.
   */
  async #reportLiveFailure(deployment: WorkDeployment, revisionId: string, message: string): Promise<void> {
    const signal = this.#stopping;
    for (let wait = 1000; !signal.aborted; wait = Math.min(wait * 2, 30_000)) {
      try {
        await this.#client.failLive(revisionId, message);
        return;
      } catch (error) {
        if (error instanceof WorkGone || (error instanceof Refused && error.status < 500)) {
          this.#o.print(`agent: ${deployment.name}: revision ${revisionId} is not reported failed: ${(error as Error).message}`);
          return;
        }
        await sleep(wait, signal);
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
