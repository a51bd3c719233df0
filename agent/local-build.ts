import { execFile } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { WorkDeployment, WorkRevision } from '../shared/schemas/agent.ts';
import { markBuilt, removeBuild } from './build-records.ts';
import { BUILD_CPU_WEIGHT } from './cgroups.ts';
import { WorkGone } from './client.ts';
import { detectInstallCommand } from './detect.ts';
import { Aborted, checkoutSource } from './git.ts';
import { type GraphConfig, readGraphConfigInside } from './graph-config.ts';
import { diskUsage, LIMITS_NONE_WARNING, spaceLimit } from './limits.ts';
import type { LocalAgentOptions } from './local-agent.ts';
import type { LogStream } from './log-stream.ts';
import { packagesKey, storedPackages, storePackages } from './package-store.ts';
import { runCommand } from './processes.ts';
import { NONE_WARNING } from './sandbox.ts';
import type { SandboxSetup } from './sandbox-setup.ts';
import { giveTo } from './sandbox-user.ts';
import { downloadTarball, hoistSingleDirectory, onControlPlane, unpackTarball } from './tarball.ts';
import { commandFailure, NO_TRACING } from './tracing.ts';

const run = promisify(execFile);

/** A failure that ends the revision (as opposed to the work being taken away). */
export class StageFailure extends Error {
  override readonly name = 'StageFailure';
}

/**
 * Builds a revision in its checkout: fetches its source, then runs install and build in their
 * sandbox, each in a cgroup of its own, under the build timeout and the disk cap.
 */
export class LocalBuilder {
  readonly #o: LocalAgentOptions;
  readonly #setup: SandboxSetup;

  constructor(options: LocalAgentOptions, setup: SandboxSetup) {
    this.#o = options;
    this.#setup = setup;
  }

  /**
   * Fetches the source (the commit of a `github` revision, or the uploaded tarball of an
   * `internal_source` one) and runs install and build from the graph config's directory;
   * answers the commit built, null for a tarball.
   */
  async build(
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
      logs.line(type, `local agent ${this.#o.agentId}: fetching ${source.repo_url} at ${source.commit_sha ?? source.ref ?? 'its default branch'}`);
      try {
        sha = await checkoutSource(source, buildDir, { env: this.#setup.gitEnv(), signal, onLine: (line) => logs.line(type, line) });
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
    if (this.#o.sandbox === 'none') logs.line(type, NONE_WARNING, 'warn');
    // Fetched by the agent; written by install and build, which run as the sandbox user.
    else giveTo(this.#o.sandboxUser, buildDir);
    const installCommand = deployment.install_command ?? detectInstallCommand(cwd);
    // Only sandboxed: the stored packages are bound read-only, which only a sandbox can do.
    const packages = this.#o.sandbox === 'bwrap' ? packagesKey(cwd, installCommand) : null;
    const reused = packages ? storedPackages(this.#o.workDir, deployment.id, packages) : null;
    if (reused)
      logs.line(type, `${installCommand}: skipped, package.json and the lock file are those of an earlier build; its installed packages are used (read-only)`);
    const steps: Array<[string, string | null]> = [
      ['install_command', reused ? null : installCommand],
      ['build_command', deployment.build_command],
    ];
    const limits = this.#setup.sandboxed() ? this.#o.limits : null;
    if (this.#setup.sandboxed() && !limits) logs.line(type, LIMITS_NONE_WARNING, 'warn');
    // Install and build share one deadline.
    const deadline = limits ? Date.now() + limits.buildTimeoutSeconds * 1000 : 0;
    for (const [label, command] of steps) {
      if (!command) continue;
      logs.line(type, `$ ${command}`);
      const cgroup = limits
        ? this.#setup.cgroup(`${deployment.id}.${revision.id}.${label}`, {
            memoryMb: limits.buildMemoryMb,
            pidsMax: limits.pidsMax,
            cpus: limits.cpus,
            cpuWeight: BUILD_CPU_WEIGHT,
          })
        : null;
      const written = [buildDir, this.#setup.cacheDir(deployment.id)];
      let result: Awaited<ReturnType<typeof runCommand>>;
      let breach: string | null = null;
      try {
        result = await (this.#o.tracing ?? NO_TRACING).step(
          // The span is the step (`install`, `build`), not the setting that names its command.
          label.replace(/_command$/, ''),
          revision,
          () =>
            runCommand(command, {
              cwd,
              env: this.#setup.buildEnv(),
              sandbox: this.#setup.sandboxFor(deployment.id, buildDir, cwd, null, reused ? { deploymentId: deployment.id, key: packages! } : null, cgroup),
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
    const kept = packages && !reused && storePackages(this.#o.workDir, deployment.id, packages, cwd) ? packages : null;
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
      from = onControlPlane(url, this.#o.url);
    } catch (error) {
      throw new StageFailure((error as Error).message);
    }
    const file = `${buildDir}.tar.gz`;
    logs.line(type, `local agent ${this.#o.agentId}: fetching the uploaded tarball from the control plane`);
    try {
      const bytes = await downloadTarball(from, this.#o.token, file, { signal });
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
}

/** Whether `command args` runs and exits 0 within 5 s. */
export async function answers(command: string, args: string[]): Promise<boolean> {
  try {
    await run(command, args, { timeout: 5000 });
    return true;
  } catch {
    return false;
  }
}
