import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Cgroup } from './cgroups.ts';
import { type EgressPolicy, inNetworkNamespace } from './sandbox-network.ts';
import type { SandboxUser } from './sandbox-user.ts';

/**
 * How the agent isolates what it runs for a deployment. `bwrap`: every install, build and agent
 * server runs in a bubblewrap sandbox (docs/decisions/local-agent-sandbox.md says what it sees and why).
 * `none`: run as the agent itself, chosen on purpose and said in a warning at every start and in
 * every build log.
 */
export type SandboxMode = 'bwrap' | 'none';

/** Where the Node binary appears inside the sandbox: the host path of the agent's own Node is not shown. */
export const SANDBOX_NODE_DIR = '/opt/node/bin';
/** The package managers' cache inside the sandbox: its deployment's own (under the agent's `--cache-dir`). */
export const SANDBOX_CACHE_DIR = '/var/cache/sandbox';
/** The sandbox's home: an empty folder on the sandbox's own /tmp, gone when the sandbox ends. */
export const SANDBOX_HOME = '/tmp/home';
/** The agent's own node_modules, read-only, for the LangGraph CLI it ships (a repository that installs none). */
export const SANDBOX_AGENT_MODULES = '/opt/agent/node_modules';

export const NONE_WARNING =
  "WARNING: --sandbox none: install, build and agent server commands run with the agent's own rights and see its files, token and environment. Use it only for code you trust.";

/** The agent refuses to start without bwrap (unless `--sandbox none`): this says why and what to install. */
export class SandboxUnavailable extends Error {
  override readonly name = 'SandboxUnavailable';
}

/** The bwrap binary on PATH, or SandboxUnavailable naming the package. */
export function findBwrap(path = process.env.PATH ?? ''): string {
  for (const dir of path.split(':').filter(Boolean)) {
    const candidate = `${dir}/bwrap`;
    if (existsSync(candidate)) {
      try {
        // Namespaces may be switched off (a container without user namespaces): try one for real.
        execFileSync(candidate, ['--ro-bind', '/', '/', '--unshare-user', '--unshare-pid', '--proc', '/proc', '--dev', '/dev', 'true'], {
          stdio: 'pipe',
          timeout: 10_000,
          env: {},
        });
        return candidate;
      } catch (error) {
        const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
        throw new SandboxUnavailable(
          `bwrap (${candidate}) cannot make a sandbox on this machine: ${stderr || (error as Error).message}. The agent needs user and pid namespaces; or start it with --sandbox none to run unsandboxed (only for code you trust).`,
        );
      }
    }
  }
  throw new SandboxUnavailable(
    'bwrap is not installed: the local agent runs every install, build and agent server in a bubblewrap sandbox. Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or start the agent with --sandbox none to run unsandboxed (only for code you trust).',
  );
}

/** What one sandboxed command may see and write. */
export type SandboxSpec = {
  /** The deployment's checkout: read-write, at its own path. */
  checkout: string;
  /** Further folders bound read-write: `from` on the host at `to` inside. */
  writable: Array<{ from: string; to: string }>;
  /** Folders bound read-only. */
  readOnly: Array<{ from: string; to: string }>;
  cwd: string;
  /**
   * Install and build die with the agent (a `kill -9` of the agent leaves no `npm ci` behind);
   * an agent server outlives it, so a restart of the agent fails no request.
   */
  dieWithAgent: boolean;
  /** Who it runs as on the host (null: the agent's own user, which is then not root). */
  user: SandboxUser | null;
  /** Its network: a namespace of its own always; egress to public addresses through pasta, or none. */
  network: { policy: EgressPolicy; pasta: string | null; resolvConf: string | null };
  /** Its resources (null: `--limits none`): its cgroup, the size of each tmpfs it gets, the largest file it may write. */
  limits: { cgroup: Cgroup; tmpMb: number; fileMb: number } | null;
};

/**
 * Files of /etc a program needs to resolve names, trust certificates and name users; the rest of
 * /etc is not shown (it may hold the machine's credentials: /etc/shadow, ssh host keys, service
 * configs). Missing ones are skipped.
 */
const ETC_FILES = [
  'resolv.conf',
  'hosts',
  'nsswitch.conf',
  'host.conf',
  'gai.conf',
  'passwd',
  'group',
  'localtime',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'pki',
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'mime.types',
];

/**
 * The bwrap arguments for one command. The environment is not among them: it is the environment
 * bwrap itself is started with, so no value (a secret) shows in any process's command line, and
 * the sandbox's pid 1 (bwrap's init, whose `/proc/1/environ` a sandboxed process can read) carries
 * nothing but what the sandbox may see anyway.
 */
export function bwrapArgs(spec: SandboxSpec): string[] {
  const args = [
    // Own user, pid, ipc, uts and cgroup namespaces; the network namespace is made around bwrap
    // (sandbox-network.ts) or, without egress, by bwrap itself.
    '--unshare-user',
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--hostname',
    'sandbox',
    // No capabilities even as the namespace's root: nothing to mount, trace or bypass permissions with.
    '--cap-drop',
    'ALL',
    // No --new-session: the agent already starts bwrap in a session of its own with no terminal
    // (nothing to push input into with TIOCSTI), and one process group for the whole sandbox is
    // what lets the agent end all of it with one signal.
    // The system, read-only. /usr holds the programs; the top-level links of a merged /usr follow it.
    '--ro-bind',
    '/usr',
    '/usr',
  ];
  for (const top of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const path = `/${top}`;
    if (!existsSync(path)) continue;
    if (isLinkTo(path, `usr/${top}`)) args.push('--symlink', `usr/${top}`, path);
    else args.push('--ro-bind', path, path);
  }
  for (const name of ETC_FILES) {
    if (existsSync(`/etc/${name}`)) args.push('--ro-bind', `/etc/${name}`, `/etc/${name}`);
  }
  // Its own /proc (only its own processes), a minimal /dev, and an empty /tmp and home of its own.
  // Each tmpfs is sized: unsized, it could hold as much as the machine's memory.
  const size = spec.limits ? ['--size', String(spec.limits.tmpMb * 1024 * 1024)] : [];
  args.push('--proc', '/proc', '--dev', '/dev', ...size, '--tmpfs', '/tmp', '--dir', SANDBOX_HOME, ...size, '--tmpfs', '/run', ...size, '--tmpfs', '/var/tmp');
  // Nothing of the kernel's settings is writable from inside, whatever the sandbox's rights are:
  // /proc/sys read-only, the sysrq trigger and the kernel's core pattern not there at all.
  args.push('--ro-bind', '/proc/sys', '/proc/sys');
  for (const hidden of ['/proc/sysrq-trigger', '/proc/kcore', '/proc/kmsg']) if (existsSync(hidden)) args.push('--ro-bind', '/dev/null', hidden);
  if (spec.network.policy.mode === 'none') args.push('--unshare-net');
  if (spec.network.resolvConf) args.push('--ro-bind', spec.network.resolvConf, '/etc/resolv.conf');
  // The checkout first: binds inside it (stored packages, the state folder) go over it, not under.
  args.push('--bind', spec.checkout, spec.checkout);
  for (const { from, to } of spec.readOnly) args.push('--ro-bind', from, to);
  for (const { from, to } of spec.writable) args.push('--bind', from, to);
  args.push('--chdir', spec.cwd);
  if (spec.dieWithAgent) args.push('--die-with-parent');
  return args;
}

/**
 * The program and arguments that run `inner` (the command inside bwrap) in its sandbox: as the
 * sandbox user (setpriv, supplementary groups cleared), in its network namespace, under bwrap;
 * with limits, inside its cgroup and with no file larger than the disk cap (prlimit).
 * `--pdeathsig KILL` where the sandbox must die with the agent: the chain's first process goes
 * when the agent does, and bwrap's `--die-with-parent` takes the rest.
 */
export function sandboxCommand(bwrap: string, spec: SandboxSpec, inner: string[]): [string, string[]] {
  const sandboxed = inNetworkNamespace([bwrap, ...bwrapArgs(spec), '--', ...inner], spec.network.policy, spec.network.pasta ?? 'pasta');
  const setpriv = [
    ...(spec.user ? ['--reuid', String(spec.user.uid), '--regid', String(spec.user.gid), '--clear-groups'] : []),
    ...(spec.dieWithAgent ? ['--pdeathsig', 'KILL'] : []),
  ];
  const chain = setpriv.length === 0 ? sandboxed : ['setpriv', ...setpriv, '--', ...sandboxed];
  // Into its cgroup first (as the agent, which may write there), and no file past the disk cap.
  const limited = spec.limits ? [...spec.limits.cgroup.joinPrefix(), 'prlimit', `--fsize=${spec.limits.fileMb * 1024 * 1024}`, '--', ...chain] : chain;
  return [limited[0]!, limited.slice(1)];
}

function isLinkTo(path: string, target: string): boolean {
  try {
    return realpathSync(path) === realpathSync(`/${target}`);
  } catch {
    return false;
  }
}

/** The read-only folders every sandboxed command gets: the agent's Node and its own node_modules. */
export function sharedReadOnly(agentModules: string | null): Array<{ from: string; to: string }> {
  const binds = [{ from: dirname(realpathSync(process.execPath)), to: SANDBOX_NODE_DIR }];
  if (agentModules && existsSync(agentModules)) binds.push({ from: realpathSync(agentModules), to: SANDBOX_AGENT_MODULES });
  return binds;
}

/** The PATH inside the sandbox: the agent's Node first, then the system's programs. */
export const SANDBOX_PATH = `${SANDBOX_NODE_DIR}:/usr/local/bin:/usr/bin:/bin`;
