import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { findCgroups, LimitsUnavailable } from './cgroups.ts';
import { connectionOptions, numberOption } from './cli-options.ts';
import { type AgentLimits, LIMITS_NONE_WARNING } from './limits.ts';
import { LocalAgent } from './local-agent.ts';
import { runUntilSignal } from './run-until-signal.ts';
import { findBwrap, NONE_WARNING, SandboxUnavailable } from './sandbox.ts';
import { badCidr, type EgressPolicy, findPasta } from './sandbox-network.ts';
import { type SandboxUser, SandboxUserUnavailable, sandboxUser } from './sandbox-user.ts';
import { tracingOrExit } from './tracing.ts';

const USAGE = `Usage: npm run agent -- [--compute local] --url <control plane URL> --listener <listener id> [--token <token>]
  [--work-dir ./data/agent] [--proxy-port 8180] [--proxy-host 127.0.0.1] [--capacity 2]
  [--agent-id <id>] [--start-timeout 120] [--sandbox bwrap|none] [--pass-env NAME]... [--cache-dir <dir>]
  [--public-url 'http://127.0.0.1:<proxy-port>/d/{name}'] [--sandbox-user NAME|UID] [--egress public|none] [--allow-egress CIDR]...
  [--public] [--key-cache-seconds 30] [--limits cgroups|none] [--memory-max-mb 1024] [--build-memory-max-mb 4096]
  [--pids-max 512] [--cpu-max 1] [--tmp-max-mb 256] [--disk-max-mb 4096] [--build-timeout 900]
The token may come from CONTROL_PLANE_AGENT_TOKEN instead of --token (it is then not visible in ps).
Every install, build and agent server runs in a bubblewrap sandbox (the bubblewrap package); --sandbox none
runs them unsandboxed, for code you trust. Each sandbox has a network of its own (pasta, the passt package):
public addresses only, private ranges refused unless --allow-egress CIDR; --egress none: no network at all.
Run as root, sandboxes run as --sandbox-user (default: a cp-sandbox user the agent makes), never as root.
Deployment URLs need X-Api-Key with a key of the deployment's workspace or organization (checked with the
control plane, answers kept --key-cache-seconds, at most 30); GET /ok stays open. --public serves them to anyone.
Each install, build and server runs in a cgroup of its own (v2 where delegated, else v1) with those limits
(a revision's resource_spec memory_limit_mb and cpu_limit win for its server); --limits none: no limits. --pass-env NAME hands the agent's variable NAME to install and
build commands (a private registry's token); nothing else of the agent's environment reaches them.
SIGTERM (a service manager's stop) leaves the proxy and the live agent servers serving: the agent started
next on the same --work-dir takes them over, so a restart fails no request. SIGINT (Ctrl-C) stops everything.
For a k8s listener: npm run agent -- --compute k8s --help`;

const PUBLIC_WARNING =
  'WARNING: --public: every deployment this agent serves answers anyone who reaches its proxy, without an API key. Use it only behind your own authentication, or for deployments meant to be public.';

/** Reads the options once, starts the agent, stops it cleanly on SIGINT / SIGTERM. */
export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const compute = computeOf(argv);
  if (compute === 'k8s') {
    const { runK8sAgent } = await import('./k8s/main.ts');
    return runK8sAgent(argv, env);
  }
  if (compute !== 'local') {
    process.stderr.write(`--compute must be local or k8s, not ${compute}\n`);
    process.exit(2);
  }
  const { values } = parseArgs({
    args: withoutCompute(argv),
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      listener: { type: 'string' },
      'work-dir': { type: 'string', default: './data/agent' },
      'proxy-port': { type: 'string', default: '8180' },
      'proxy-host': { type: 'string', default: '127.0.0.1' },
      capacity: { type: 'string', default: '2' },
      'agent-id': { type: 'string' },
      'start-timeout': { type: 'string', default: '120' },
      sandbox: { type: 'string', default: 'bwrap' },
      'pass-env': { type: 'string', multiple: true, default: [] },
      'cache-dir': { type: 'string' },
      'public-url': { type: 'string' },
      'sandbox-user': { type: 'string' },
      public: { type: 'boolean', default: false },
      'key-cache-seconds': { type: 'string', default: '30' },
      limits: { type: 'string', default: 'cgroups' },
      'memory-max-mb': { type: 'string', default: '1024' },
      'build-memory-max-mb': { type: 'string', default: '4096' },
      'pids-max': { type: 'string', default: '512' },
      'cpu-max': { type: 'string', default: '1' },
      'tmp-max-mb': { type: 'string', default: '256' },
      'disk-max-mb': { type: 'string', default: '4096' },
      'build-timeout': { type: 'string', default: '900' },
      egress: { type: 'string', default: 'public' },
      'allow-egress': { type: 'string', multiple: true, default: [] },
      help: { type: 'boolean' },
    },
  });
  const { url, listenerId, token } = connectionOptions(values, env, USAGE);
  const int = (name: string, value: string, min: number) => numberOption(name, value, min);
  const sandbox = values.sandbox;
  if (sandbox !== 'bwrap' && sandbox !== 'none') {
    process.stderr.write(`--sandbox must be bwrap or none, not ${sandbox}\n`);
    process.exit(2);
  }
  const publicUrl = values['public-url'];
  if (publicUrl !== undefined && (!publicUrl.includes('{name}') || !URL.canParse(publicUrl.replaceAll('{name}', 'x')) || !/^https?:/.test(publicUrl))) {
    process.stderr.write(`--public-url must be an http(s) URL template with {name} in it (http://{name}.agents.example.com, http://10.0.0.5:8180/d/{name})\n`);
    process.exit(2);
  }
  const passEnv = values['pass-env'];
  for (const name of passEnv) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || name === 'CONTROL_PLANE_AGENT_TOKEN') {
      process.stderr.write(`--pass-env ${name}: not a variable name the agent passes on\n`);
      process.exit(2);
    }
  }
  const egressMode = values.egress;
  if (egressMode !== 'public' && egressMode !== 'none') {
    process.stderr.write(`--egress must be public or none, not ${egressMode}\n`);
    process.exit(2);
  }
  const egress: EgressPolicy = { mode: egressMode, allow: values['allow-egress'] };
  for (const cidr of egress.allow) {
    const bad = badCidr(cidr);
    if (bad) {
      process.stderr.write(`${bad}\n`);
      process.exit(2);
    }
  }
  let bwrapPath: string | null = null;
  let pastaPath: string | null = null;
  let user: SandboxUser | null = null;
  if (sandbox === 'bwrap') {
    try {
      bwrapPath = findBwrap(env.PATH ?? '');
      user = sandboxUser(values['sandbox-user']);
    } catch (error) {
      if (!(error instanceof SandboxUnavailable) && !(error instanceof SandboxUserUnavailable)) throw error;
      process.stderr.write(`agent: ${error.message}\n`);
      process.exit(1);
    }
    pastaPath = findPasta(env.PATH ?? '');
    if (egress.mode === 'public' && !pastaPath) {
      process.stderr.write(
        'agent: pasta is not installed: each sandbox gets a network namespace of its own, connected to public addresses by pasta. Install it (Debian/Ubuntu: apt-get install passt), or start the agent with --egress none (no network for installs, builds and servers).\n',
      );
      process.exit(1);
    }
    if (user) process.stdout.write(`agent: sandboxes run as host user ${user.name} (uid ${user.uid}), not root\n`);
  } else {
    process.stderr.write(`agent: ${NONE_WARNING}\n`);
  }
  const keyCacheSeconds = int('key-cache-seconds', values['key-cache-seconds'], 0);
  if (keyCacheSeconds > 30) {
    process.stderr.write('--key-cache-seconds is at most 30: a revoked key must stop working within 30 s\n');
    process.exit(2);
  }
  if (values.public) process.stderr.write(`agent: ${PUBLIC_WARNING}\n`);
  if (values.limits !== 'cgroups' && values.limits !== 'none') {
    process.stderr.write(`--limits must be cgroups or none, not ${values.limits}\n`);
    process.exit(2);
  }
  const cpus = Number(values['cpu-max']);
  if (!Number.isFinite(cpus) || cpus <= 0) {
    process.stderr.write(`--cpu-max must be a number of cores above 0 (0.5, 2), not ${values['cpu-max']}\n`);
    process.exit(2);
  }
  let limits: AgentLimits | null = null;
  if (sandbox === 'bwrap' && values.limits === 'cgroups') {
    try {
      limits = {
        cgroups: findCgroups(),
        memoryMb: int('memory-max-mb', values['memory-max-mb'], 16),
        buildMemoryMb: int('build-memory-max-mb', values['build-memory-max-mb'], 16),
        pidsMax: int('pids-max', values['pids-max'], 8),
        cpus,
        tmpMb: int('tmp-max-mb', values['tmp-max-mb'], 1),
        diskMb: int('disk-max-mb', values['disk-max-mb'], 16),
        buildTimeoutSeconds: int('build-timeout', values['build-timeout'], 1),
      };
    } catch (error) {
      if (!(error instanceof LimitsUnavailable)) throw error;
      process.stderr.write(`agent: ${error.message}; or start it with --limits none (no resource limits: one deployment can starve the others)\n`);
      process.exit(1);
    }
  } else if (sandbox === 'bwrap') {
    process.stderr.write(`agent: ${LIMITS_NONE_WARNING}\n`);
  }
  const tracing = await tracingOrExit(env, 'local-agent');
  const agent = new LocalAgent({
    url,
    token,
    listenerId,
    agentId: values['agent-id'] ?? `${hostname()}-${process.pid}`,
    version: 'local-agent/0.1.0',
    workDir: values['work-dir'],
    proxyPort: int('proxy-port', values['proxy-port'], 0),
    proxyHost: values['proxy-host'],
    capacity: int('capacity', values.capacity, 1),
    startTimeoutMs: int('start-timeout', values['start-timeout'], 1) * 1000,
    env,
    sandbox,
    bwrapPath,
    sandboxUser: user,
    limits,
    public: values.public,
    keyCacheMs: keyCacheSeconds * 1000,
    egress,
    pastaPath,
    passEnv,
    cacheDir: values['cache-dir'],
    publicUrl,
    print: (line) => process.stdout.write(`${line}\n`),
    tracing,
  });
  // SIGTERM (a restart, an upgrade) leaves the servers serving for the agent that comes next; SIGINT stops them.
  await runUntilSignal({ start: () => agent.start(), stop: (signal) => agent.stop({ leaveServing: signal === 'SIGTERM' }) }, tracing);
}

/** `--compute k8s` / `--compute=k8s` picks the agent; `local` when absent. */
function computeOf(argv: string[]): string {
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--compute') return argv[i + 1] ?? '';
    if (argv[i]?.startsWith('--compute=')) return argv[i]!.slice('--compute='.length);
  }
  return 'local';
}

function withoutCompute(argv: string[]): string[] {
  return argv.filter((arg, i) => arg !== '--compute' && argv[i - 1] !== '--compute' && !arg.startsWith('--compute='));
}
